// Group 6, scaling: the end-to-end load (kBuffered, one subscriber writing
// an effect per event) against the number of subjects and the payload
// size.
//
// Subjects: per-subject order allows one event of a subject in flight per
// subscriber, so 1 subject serializes the handler; 1M subjects makes
// nearly every event start a new per-subject queue in the dispatcher.
// Payload: 64 B to 64 KiB per event; each point stops after its time or
// after Profile::payload_bytes_per_point bytes of payload, whichever comes
// first. rss_peak_mib is reported because the tail cache of recent events
// is bounded in events, not bytes.
#include <string>

#include "bench/bench_common.h"

namespace bench {
namespace {

constexpr uint64_t kPayloadSubjects = 1000;

void Run(benchmark::State& state, const EndToEndSpec& spec) {
  for (auto _ : state) {
    EndToEndResult r;
    if (Failed(state, RunWalbusEndToEnd(spec, &r))) return;
    ReportEndToEnd(state, r, spec.subscribers);
    state.counters["payload_mib_per_second"] = MiB(r.events * spec.payload_bytes) / r.total_seconds;
    state.counters["rss_peak_mib"] = r.rss_peak_mib;
  }
}

}  // namespace

void RegisterScalingBenchmarks() {
  const Profile& profile = CurrentProfile();
  EndToEndSpec base{.durability = walbus::Durability::kBuffered,
                    .subscribers = 1,
                    .producers = profile.end_to_end_producers,
                    .seconds = profile.scaling_seconds};
  for (uint64_t subjects : profile.subject_counts) {
    EndToEndSpec spec = base;
    spec.subjects = subjects;
    RegisterMeasurement(BenchName("Scaling", {{"subjects", std::to_string(subjects)}}),
                        [spec](benchmark::State& s) { Run(s, spec); });
  }
  for (size_t payload : profile.payload_sizes) {
    EndToEndSpec spec = base;
    spec.subjects = kPayloadSubjects;
    spec.payload_bytes = payload;
    spec.max_events = std::max<uint64_t>(1, profile.payload_bytes_per_point / payload);
    RegisterMeasurement(BenchName("Scaling", {{"payload_bytes", std::to_string(payload)}}),
                        [spec](benchmark::State& s) { Run(s, spec); });
  }
}

}  // namespace bench
