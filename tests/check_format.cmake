# Fails when a C or C++ source is not formatted as .clang-format says (run
# `tools/dev format` to format them). Run by ctest as FormatCheck.
#   cmake -DCLANG_FORMAT=<clang-format> -DSOURCE_DIR=<tree> -P check_format.cmake
set(sources "")
foreach(dir bus storage bridge prometheus tools tests bench examples)
  file(GLOB_RECURSE found ${SOURCE_DIR}/${dir}/*.cc ${SOURCE_DIR}/${dir}/*.h ${SOURCE_DIR}/${dir}/*.c)
  list(APPEND sources ${found})
endforeach()
list(FILTER sources EXCLUDE REGEX "/tests/fuzz/(corpus|regressions)/")
execute_process(COMMAND ${CLANG_FORMAT} --style=file --dry-run --Werror ${sources}
                WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE rc ERROR_VARIABLE problems)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sources not formatted as .clang-format says (tools/dev format fixes them):\n${problems}")
endif()
list(LENGTH sources n)
message(STATUS "${n} sources formatted as .clang-format says")
