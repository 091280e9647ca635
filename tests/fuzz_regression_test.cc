// Replays the fuzz seed corpus (tests/fuzz/corpus/<target>/) and every
// crash input found so far (tests/fuzz/regressions/<target>/) through the
// checks the libFuzzer targets run, so that they hold in every build, not
// only in the fuzz preset.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_checks.h"

#ifndef WALBUS_FUZZ_DIR
#error "WALBUS_FUZZ_DIR must name tests/fuzz (tests/CMakeLists.txt sets it)"
#endif

namespace walbus::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTargets[] = {"envelope_fuzz", "records_fuzz", "cli_values_fuzz",
                                    "inbound_fuzz",  "schema_fuzz",  "payload_fuzz"};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Regular files directly in dir, sorted; none when dir does not exist.
std::vector<fs::path> FilesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Subdirectories of dir, sorted.
std::vector<fs::path> SubdirsOf(const fs::path& dir) {
  std::vector<fs::path> dirs;
  if (!fs::is_directory(dir)) return dirs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Runs every file of every <target>/ under root through its target's check;
// returns how many files ran.
size_t ReplayTree(const fs::path& root) {
  size_t ran = 0;
  for (const fs::path& dir : SubdirsOf(root)) {
    const std::string target = dir.filename().string();
    CheckFn check = CheckForTarget(target);
    EXPECT_NE(check, nullptr) << dir << " does not name a fuzz target";
    if (check == nullptr) continue;
    for (const fs::path& file : FilesIn(dir)) {
      const std::string bytes = ReadAll(file);
      std::string why;
      EXPECT_TRUE(check(bytes, &why)) << file << ": " << why;
      ++ran;
    }
  }
  return ran;
}

TEST(FuzzRegressionTest, EveryTargetHasASeedCorpus) {
  for (const char* target : kTargets) {
    EXPECT_FALSE(FilesIn(fs::path(WALBUS_FUZZ_DIR) / "corpus" / target).empty()) << target;
  }
}

TEST(FuzzRegressionTest, SeedCorpusPassesEveryCheck) {
  EXPECT_GT(ReplayTree(fs::path(WALBUS_FUZZ_DIR) / "corpus"), 0u);
}

TEST(FuzzRegressionTest, EveryCrashInputFoundByFuzzingPasses) { ReplayTree(fs::path(WALBUS_FUZZ_DIR) / "regressions"); }

}  // namespace
}  // namespace walbus::fuzz
