// bus_bench: every benchmark group of the suite (bench/run_suite.py runs
// them group by group and summarizes).
//
//   bus_bench [--profile=smoke|quick|full] [Google Benchmark flags]
//
// --profile sets how long and how large each measurement is (default
// full); --benchmark_filter=^Publish/ and the like select groups. The
// benchmarks are registered after the profile is known, so their names
// show the sizes they ran with.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_common.h"

namespace {

constexpr std::string_view kProfileFlag = "--profile=";

}  // namespace

int main(int argc, char** argv) {
  std::string profile = "full";
  std::string fill_dir;
  uint64_t fill_events = 0;
  int fill_subscribers = 1;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kProfileFlag)) {
      profile = arg.substr(kProfileFlag.size());
    } else if (arg.starts_with(bench::kFillBacklogFlag)) {
      fill_dir = arg.substr(std::string_view(bench::kFillBacklogFlag).size());
    } else if (arg.starts_with(bench::kFillEventsFlag)) {
      fill_events = std::strtoull(argv[i] + std::string_view(bench::kFillEventsFlag).size(), nullptr, 10);
    } else if (arg.starts_with(bench::kFillSubscribersFlag)) {
      fill_subscribers = std::atoi(argv[i] + std::string_view(bench::kFillSubscribersFlag).size());
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!fill_dir.empty()) return bench::FillBacklog(fill_dir, fill_events, fill_subscribers);
  if (!bench::SelectProfile(profile)) {
    std::fprintf(stderr, "unknown profile '%s' (smoke, quick or full)\n", profile.c_str());
    return 2;
  }
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;
  bench::RegisterPublishBenchmarks();
  bench::RegisterEndToEndBenchmarks();
  bench::RegisterLatencyBenchmarks();
  bench::RegisterDispatchBenchmarks();
  bench::RegisterBacklogBenchmarks();
  bench::RegisterScalingBenchmarks();
  bench::RegisterScanBenchmarks();
  bench::RegisterTimerBenchmarks();
  bench::RegisterDeviceBenchmarks();
  bench::RegisterProcessBenchmarks();
  benchmark::AddCustomContext("profile", profile);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
