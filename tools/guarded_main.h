// The tools' main: runs the tool's own, and turns an exception nothing in
// the tool caught into a message on standard error and exit status 1,
// instead of std::terminate's abort.
#ifndef WALBUS_TOOLS_GUARDED_MAIN_H_
#define WALBUS_TOOLS_GUARDED_MAIN_H_

#include <cstdio>
#include <exception>

namespace walbus::tools {

inline int GuardedMain(const char* tool, int (*run)(int, char**), int argc, char** argv) noexcept {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: an unknown exception\n", tool);
  }
  return 1;
}

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_GUARDED_MAIN_H_
