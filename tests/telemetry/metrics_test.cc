// The metrics writer (bus/telemetry/metrics.cc): histograms, the
// Prometheus text format as Prometheus's own clients print it. What a bus
// reports is tested in tests/api/bus_metrics_test.cc.
#include "bus/telemetry/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace walbus {
namespace {

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  internal::Histogram h({1, 10});
  h.Observe(0.5);
  h.Observe(5);
  h.Observe(50);
  auto s = h.Read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(s.count, 3u);
  EXPECT_NEAR(s.sum, 55.5, 1e-6);
}

// As Go's strconv.FormatFloat(v, 'g', -1, 64), which Prometheus' clients use.
TEST(MetricsTest, NumbersPrintAsPrometheusClientsPrintThem) {
  const std::pair<double, const char*> cases[] = {
      {0, "0"},         {1, "1"},           {-1, "-1"},         {0.1, "0.1"},
      {5e-05, "5e-05"}, {0.0001, "0.0001"}, {0.0005, "0.0005"}, {0.00025, "0.00025"},
      {2.5, "2.5"},     {123456, "123456"}, {1e6, "1e+06"},     {1234567, "1.234567e+06"},
      {1e21, "1e+21"},  {23.466, "23.466"}, {0.999, "0.999"},
  };
  for (const auto& [value, text] : cases) {
    internal::MetricsWriter w;
    w.Family("walbus_v", MetricType::kGauge, "v");
    w.Sample("walbus_v", {}, value);
    EXPECT_EQ(w.text(), std::string("# HELP walbus_v v\n# TYPE walbus_v gauge\nwalbus_v ") + text + "\n") << value;
  }
}

TEST(MetricsTest, TextEscapesLabelsAndPrintsShortestNumbers) {
  internal::MetricsWriter w;
  w.Family("walbus_x_seconds", MetricType::kHistogram, "Help with a \\ and a\nnewline.");
  internal::Histogram h(internal::Histogram::SecondsBounds());
  h.Observe(0.0002);
  w.HistogramSamples("walbus_x_seconds", internal::MetricsWriter::Label("k", "a\"b\\c\nd"), h.Read());
  w.Family("walbus_y", MetricType::kGauge, "A gauge.");
  w.Sample("walbus_y", {}, 0.1);
  const std::string text = w.text();
  EXPECT_NE(text.find("# HELP walbus_x_seconds Help with a \\\\ and a\\nnewline.\n"), std::string::npos) << text;
  EXPECT_NE(text.find("walbus_x_seconds_bucket{k=\"a\\\"b\\\\c\\nd\",le=\"5e-05\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.00025\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"2.5\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("walbus_y 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.0005\"} 1\n"), std::string::npos) << "fixed from 1e-4 on, as Go prints: " << text;
  // Every bound is written short and reads back as the double it was.
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t le = line.find("le=\"");
    if (le == std::string::npos || line.find("+Inf") != std::string::npos) continue;
    const std::string value = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    EXPECT_LE(value.size(), 7u) << line;
    const double parsed = std::stod(value);
    const auto bounds = internal::Histogram::SecondsBounds();
    EXPECT_NE(std::find(bounds.begin(), bounds.end(), parsed), bounds.end()) << line;
  }
}

}  // namespace
}  // namespace walbus
