# Fails when a public header (walbus/*.h) includes a header of a dependency:
# users of the installed library have only walbus's headers and the
# standard library. Run by ctest as PublicHeadersIncludeNoDependency.
#   cmake -DHEADERS_DIR=<bus/include/walbus> -P check_public_includes.cmake
file(GLOB headers ${HEADERS_DIR}/*.h)
if(NOT headers)
  message(FATAL_ERROR "no headers in ${HEADERS_DIR}")
endif()
set(bad "")
foreach(header ${headers})
  file(STRINGS ${header} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "[<\"](rocksdb|spdlog|fmt|flatbuffers|concurrentqueue|CLI|gtest|gmock)/"
       OR line MATCHES "[<\"](bus|storage)/"
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
