#include "bus/telemetry/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <string_view>

namespace walbus::internal {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) { assert(bounds_.size() <= 32); }

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  if (value > 0) sum_nanos_.fetch_add(static_cast<uint64_t>(value * 1e9), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

std::vector<double> Histogram::SecondsBounds() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// Counts start at 1. A quantile interpolates linearly inside its bucket,
// from the bound below; with 1 as the lowest bound that is 0, and a run of
// single commits reads as p90 0.9. The lowest bucket, 0.999, stays empty
// and puts the bound below 1 within 0.001 of it.
std::vector<double> Histogram::SizeBounds() { return {0.999, 1, 2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024}; }

void MetricsWriter::Family(const std::string& name, MetricType type, const std::string& help) {
  families_.push_back(MetricFamily{name, type, help, {}});
}

MetricSample& MetricsWriter::NewSample(const std::string& name, Labels labels) {
  assert(!families_.empty() && families_.back().name == name);
  (void)name;
  MetricSample& sample = families_.back().samples.emplace_back();
  sample.labels = std::move(labels);
  return sample;
}

void MetricsWriter::Sample(const std::string& name, Labels labels, double value) {
  NewSample(name, std::move(labels)).value = value;
}

void MetricsWriter::HistogramSamples(const std::string& name, Labels labels, const Histogram::Snapshot& h) {
  assert(families_.back().type == MetricType::kHistogram);
  MetricSample& sample = NewSample(name, std::move(labels));
  for (size_t i = 0; i < h.bounds.size(); ++i) sample.buckets.push_back({h.bounds[i], h.cumulative[i]});
  sample.sum = h.sum;
  sample.count = h.count;
}

MetricsWriter::Labels MetricsWriter::Label(std::string key, std::string value) {
  return {MetricLabel{std::move(key), std::move(value)}};
}

void WriteProgressMetrics(MetricsWriter& w, uint64_t last_seq, double oldest_backlog_age_seconds,
                          const std::vector<SubscriberProgress>& subscribers) {
  uint64_t min_checkpoint = last_seq;
  for (const auto& s : subscribers) min_checkpoint = std::min(min_checkpoint, s.checkpoint);
  w.Family("walbus_last_sequence", MetricType::kGauge, "Sequence number of the newest committed event.");
  w.Sample("walbus_last_sequence", {}, static_cast<double>(last_seq));
  w.Family("walbus_outbox_backlog_events", MetricType::kGauge, "Events not yet passed by every registered subscriber.");
  w.Sample("walbus_outbox_backlog_events", {}, static_cast<double>(last_seq - min_checkpoint));
  w.Family("walbus_outbox_oldest_age_seconds", MetricType::kGauge,
           "Age of the oldest event not yet passed by every subscriber.");
  w.Sample("walbus_outbox_oldest_age_seconds", {}, oldest_backlog_age_seconds);
  struct Column {
    const char* name;
    const char* help;
    double (*value)(const SubscriberProgress&, uint64_t last_seq);
  };
  static const Column kColumns[] = {
      {"walbus_subscriber_handled_persisted", "Events whose handler effects committed, over the database's life.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.handled); }},
      {"walbus_subscriber_duplicates_persisted",
       "Redeliveries the inbox recognised and skipped, over the database's life.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.duplicates); }},
      {"walbus_subscriber_dead_lettered_persisted", "Events sent to the dead-letter store, over the database's life.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.dead_lettered); }},
      {"walbus_subscriber_stale_skipped_persisted",
       "Events skipped as older than the applied version, over the database's life.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.stale_skipped); }},
      {"walbus_subscriber_checkpoint_sequence", "Every event at or below it is completed.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.checkpoint); }},
      {"walbus_subscriber_lag_events", "Committed events the subscriber has not completed.",
       [](const SubscriberProgress& s, uint64_t last) { return double(last - s.checkpoint); }},
      {"walbus_subscriber_lag_seconds", "Age of the oldest event the subscriber has not completed.",
       [](const SubscriberProgress& s, uint64_t) { return s.lag_seconds; }},
  };
  for (const Column& c : kColumns) {
    w.Family(c.name, MetricType::kGauge, c.help);
    for (const auto& s : subscribers)
      w.Sample(c.name, MetricsWriter::Label("subscriber", s.name), c.value(s, last_seq));
  }
}

}  // namespace walbus::internal

namespace walbus {
namespace {

// The shortest text that reads back as the same double, in the form Go's
// strconv.FormatFloat(v, 'g', -1, 64) gives, which Prometheus' own clients
// print: exponent form below 1e-4 and from 1e+06 on, else fixed
// (5e-05, 0.0005, 0.00025, 1, 123456, 1e+06, +Inf).
void AppendNumber(std::string* out, double v) {
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  assert(ec == std::errc());
  const std::string_view scientific(buf, static_cast<size_t>(end - buf));
  const size_t e = scientific.find('e');
  const size_t digits = e + (scientific[e + 1] == '+' ? 2 : 1);  // from_chars takes '-', not '+'
  int exponent = 0;
  std::from_chars(scientific.data() + digits, scientific.data() + scientific.size(), exponent);
  if (v == 0 || exponent < -4 || exponent >= 6) {
    out->append(v == 0 ? "0" : scientific);
    return;
  }
  const std::to_chars_result fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  assert(fixed.ec == std::errc());
  out->append(buf, fixed.ptr);
}

void AppendEscaped(std::string* out, std::string_view value, bool quote_too) {
  for (char c : value) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote_too) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// name{labels} value, with `le` (when given) after the sample's labels.
void AppendSeries(std::string* out, std::string_view name, const std::vector<MetricLabel>& labels,
                  const std::string* le, double value) {
  out->append(name);
  if (!labels.empty() || le != nullptr) {
    out->push_back('{');
    bool first = true;
    for (const MetricLabel& label : labels) {
      if (!first) out->push_back(',');
      first = false;
      out->append(label.name + "=\"");
      AppendEscaped(out, label.value, true);
      out->push_back('"');
    }
    if (le != nullptr) out->append(std::string(first ? "" : ",") + "le=\"" + *le + "\"");
    out->push_back('}');
  }
  out->push_back(' ');
  AppendNumber(out, value);
  out->push_back('\n');
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void AppendHistogram(std::string* out, const std::string& name, const MetricSample& sample) {
  for (const MetricBucket& bucket : sample.buckets) {
    std::string le;
    AppendNumber(&le, bucket.upper_bound);
    AppendSeries(out, name + "_bucket", sample.labels, &le, static_cast<double>(bucket.cumulative_count));
  }
  const std::string inf = "+Inf";
  AppendSeries(out, name + "_bucket", sample.labels, &inf, static_cast<double>(sample.count));
  AppendSeries(out, name + "_sum", sample.labels, nullptr, sample.sum);
  AppendSeries(out, name + "_count", sample.labels, nullptr, static_cast<double>(sample.count));
}

}  // namespace

std::string PrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& family : families) {
    out.append("# HELP " + family.name + " ");
    AppendEscaped(&out, family.help, false);
    out.append(std::string("\n# TYPE ") + family.name + " " + TypeName(family.type) + "\n");
    for (const MetricSample& sample : family.samples) {
      if (family.type == MetricType::kHistogram) {
        AppendHistogram(&out, family.name, sample);
      } else {
        AppendSeries(&out, family.name, sample.labels, nullptr, sample.value);
      }
    }
  }
  return out;
}

namespace internal {

std::string MetricNumber(double v) {
  std::string text;
  AppendNumber(&text, v);
  return text;
}

}  // namespace internal
}  // namespace walbus
