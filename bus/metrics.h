// Histogram: a fixed-bucket distribution for metrics, cheap enough for the
// commit and handler paths.
//
// Threading: Observe() is thread-safe and lock-free; Read() may run
// concurrently and sees each counter at some recent value.
#ifndef WALBUS_BUS_METRICS_H_
#define WALBUS_BUS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace walbus::internal {

class Histogram {
 public:
  // REQUIRES: bounds ascending; at most 32 of them.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

  // Bucket bounds for durations (seconds) and for group sizes.
  static std::vector<double> SecondsBounds();
  static std::vector<double> SizeBounds();

 private:
  const std::vector<double> bounds_;
  std::atomic<uint64_t> counts_[33] = {};
  std::atomic<uint64_t> sum_nanos_{0};  // sum in units of 1e-9
};

// Renders Prometheus text exposition, one family at a time.
class MetricsWriter {
 public:
  // `type` is "counter", "gauge" or "histogram". Labels are rendered as
  // given ("subscriber=\"x\""), already escaped.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const std::string& labels, double value);
  void HistogramSamples(const std::string& name, const std::string& labels, const Histogram::Snapshot& h);
  const std::string& text() const { return out_; }

  // Escapes a label value (backslash, quote, newline).
  static std::string Label(const std::string& key, const std::string& value);

 private:
  std::string out_;
};

// What the database itself records of a subscriber's progress: the part of
// the metrics that a live bus and the command-line tool (reading a stopped
// or live database) render alike, under the same names.
struct SubscriberProgress {
  std::string name;
  uint64_t checkpoint = 0;
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t dead_lettered = 0;
  uint64_t stale_skipped = 0;
  double lag_seconds = 0;  // age of the oldest event it has not completed
};
void WriteProgressMetrics(MetricsWriter& w, uint64_t last_seq, double oldest_backlog_age_seconds,
                          const std::vector<SubscriberProgress>& subscribers);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_METRICS_H_
