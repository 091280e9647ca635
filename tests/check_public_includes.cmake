# Fails when a public header (walbus/*.h) includes a header of a dependency:
# users of the installed library have only walbus's headers and the
# standard library. Run by ctest as PublicHeadersIncludeNoDependency.
#   cmake "-DHEADERS_DIRS=<bus/include/walbus>;<bridge/include/walbus>" -P check_public_includes.cmake
set(headers "")
foreach(dir ${HEADERS_DIRS})
  file(GLOB found ${dir}/*.h)
  if(NOT found)
    message(FATAL_ERROR "no headers in ${dir}")
  endif()
  list(APPEND headers ${found})
endforeach()
set(bad "")
foreach(header ${headers})
  file(STRINGS ${header} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "[<\"](rocksdb|spdlog|fmt|flatbuffers|concurrentqueue|CLI|gtest|gmock|nats|openssl)/"
       OR line MATCHES "[<\"](bus|storage|bridge)/"
       OR line MATCHES "_generated\\.h")
      string(APPEND bad "  ${header}: ${line}\n")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "public headers include non-public headers:\n${bad}")
endif()
list(LENGTH headers n)
message(STATUS "${n} public headers include only walbus/ and standard headers")
