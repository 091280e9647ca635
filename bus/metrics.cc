#include "bus/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

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

std::vector<double> Histogram::SizeBounds() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

namespace {

std::string Number(double v) {
  if (std::isinf(v)) return "+Inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string WithLabels(const std::string& name, const std::string& labels) {
  return labels.empty() ? name : name + "{" + labels + "}";
}

}  // namespace

void MetricsWriter::Family(const std::string& name, const std::string& type, const std::string& help) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsWriter::Sample(const std::string& name, const std::string& labels, double value) {
  out_ += WithLabels(name, labels) + " " + Number(value) + "\n";
}

void MetricsWriter::HistogramSamples(const std::string& name, const std::string& labels, const Histogram::Snapshot& h) {
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < h.cumulative.size(); ++i) {
    const std::string le = i < h.bounds.size() ? Number(h.bounds[i]) : "+Inf";
    out_ += name + "_bucket{" + sep + "le=\"" + le + "\"} " + std::to_string(h.cumulative[i]) + "\n";
  }
  out_ += WithLabels(name + "_sum", labels) + " " + Number(h.sum) + "\n";
  out_ += WithLabels(name + "_count", labels) + " " + std::to_string(h.count) + "\n";
}

std::string MetricsWriter::Label(const std::string& key, const std::string& value) {
  std::string out = key + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void WriteProgressMetrics(MetricsWriter& w, uint64_t last_seq, double oldest_backlog_age_seconds,
                          const std::vector<SubscriberProgress>& subscribers) {
  uint64_t min_checkpoint = last_seq;
  for (const auto& s : subscribers) min_checkpoint = std::min(min_checkpoint, s.checkpoint);
  w.Family("walbus_last_sequence", "gauge", "Sequence number of the newest committed event.");
  w.Sample("walbus_last_sequence", "", static_cast<double>(last_seq));
  w.Family("walbus_outbox_backlog_events", "gauge", "Events not yet passed by every registered subscriber.");
  w.Sample("walbus_outbox_backlog_events", "", static_cast<double>(last_seq - min_checkpoint));
  w.Family("walbus_outbox_oldest_age_seconds", "gauge", "Age of the oldest event not yet passed by every subscriber.");
  w.Sample("walbus_outbox_oldest_age_seconds", "", oldest_backlog_age_seconds);
  struct Column {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const SubscriberProgress&, uint64_t last_seq);
  };
  static const Column kColumns[] = {
      {"walbus_subscriber_handled_total", "counter", "Events whose handler effects committed.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.handled); }},
      {"walbus_subscriber_duplicates_total", "counter", "Redeliveries the inbox recognised and skipped.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.duplicates); }},
      {"walbus_subscriber_dead_lettered_total", "counter", "Events sent to the dead-letter store.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.dead_lettered); }},
      {"walbus_subscriber_stale_skipped_total", "counter", "Events skipped as older than the applied version.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.stale_skipped); }},
      {"walbus_subscriber_checkpoint_sequence", "gauge", "Every event at or below it is completed.",
       [](const SubscriberProgress& s, uint64_t) { return double(s.checkpoint); }},
      {"walbus_subscriber_lag_events", "gauge", "Committed events the subscriber has not completed.",
       [](const SubscriberProgress& s, uint64_t last) { return double(last - s.checkpoint); }},
      {"walbus_subscriber_lag_seconds", "gauge", "Age of the oldest event the subscriber has not completed.",
       [](const SubscriberProgress& s, uint64_t) { return s.lag_seconds; }},
  };
  for (const Column& c : kColumns) {
    w.Family(c.name, c.type, c.help);
    for (const auto& s : subscribers) w.Sample(c.name, MetricsWriter::Label("subscriber", s.name), c.value(s, last_seq));
  }
}

}  // namespace walbus::internal
