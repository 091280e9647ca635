#include "bus/metrics.h"

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

}  // namespace walbus::internal
