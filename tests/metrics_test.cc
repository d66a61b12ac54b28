// The metrics registry renders what Prometheus parses: checked with the
// strict exposition reader the integration tests also use.
#include "http/metrics.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/support/exposition.h"

using hutch::api::Registry;
using hutch::testing::ParseExposition;

TEST(Metrics, RendersCountersGaugesAndLabels) {
  Registry r;
  auto& c = r.AddCounter("t_requests_total", "Requests.");
  auto& g = r.AddGauge("t_open", "Open things.");
  auto& f = r.AddCounterFamily("t_errors_total", "Errors by code.", {"code"});
  ++c;
  c.Inc(2);
  g.Set(2.5);
  --g;
  ++f.With({"b"});
  f.With({"a"}).Inc(4);
  std::string text = r.Render();
  EXPECT_EQ(
      text,
      "# HELP t_requests_total Requests.\n# TYPE t_requests_total counter\nt_requests_total 3\n"
      "# HELP t_open Open things.\n# TYPE t_open gauge\nt_open 1.5\n"
      "# HELP t_errors_total Errors by code.\n# TYPE t_errors_total counter\n"
      "t_errors_total{code=\"a\"} 4\nt_errors_total{code=\"b\"} 1\n");
  auto p = ParseExposition(text);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.Value("t_errors_total", {{"code", "a"}}), 4);
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  Registry r;
  auto& f = r.AddGaugeFamily("t_g", "Help with \\ and\nnewline.", {"v"});
  std::string odd = "q\"uote back\\slash new\nline";
  f.With({odd}).Set(1);
  std::string text = r.Render();
  EXPECT_NE(text.find(R"(t_g{v="q\"uote back\\slash new\nline"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP t_g Help with \\\\ and\\nnewline.\n"), std::string::npos) << text;
  auto p = ParseExposition(text);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.Value("t_g", {{"v", odd}}), 1);  // round-trips
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInf) {
  Registry r;
  auto& h = r.AddHistogram("t_seconds", "Latency.", {0.005, 0.1, 1, 30});
  h.Observe(0.001);
  h.Observe(0.005);  // on the bound: counts in that bucket (le = less or equal)
  h.Observe(0.5);
  h.Observe(100);
  std::string text = r.Render();
  auto p = ParseExposition(text);
  ASSERT_TRUE(p.ok()) << p.error << "\n" << text;
  EXPECT_EQ(p.types["t_seconds"], "histogram");
  EXPECT_EQ(p.Value("t_seconds_bucket", {{"le", "0.005"}}), 2);
  EXPECT_EQ(p.Value("t_seconds_bucket", {{"le", "0.1"}}), 2);
  EXPECT_EQ(p.Value("t_seconds_bucket", {{"le", "1"}}), 3);
  EXPECT_EQ(p.Value("t_seconds_bucket", {{"le", "30"}}), 3);
  EXPECT_EQ(p.Value("t_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(p.Value("t_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(*p.Value("t_seconds_sum"), 100.506);
}

TEST(Metrics, SampleValues) {
  using hutch::api::FormatSampleValue;
  EXPECT_EQ(FormatSampleValue(3), "3");
  EXPECT_EQ(FormatSampleValue(0.025), "0.025");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(Metrics, CheckerRejectsWhatPrometheusRejects) {
  EXPECT_FALSE(ParseExposition("a 1").ok());                      // no final newline
  EXPECT_FALSE(ParseExposition("1a 1\n").ok());                   // bad name
  EXPECT_FALSE(ParseExposition("a{b=\"x\\q\"} 1\n").ok());        // bad escape
  EXPECT_FALSE(ParseExposition("a{b=\"x} 1\n").ok());             // unterminated
  EXPECT_FALSE(ParseExposition("a one\n").ok());                  // bad value
  EXPECT_FALSE(ParseExposition("a 1\n# TYPE a counter\n").ok());  // TYPE after samples
  EXPECT_FALSE(ParseExposition("a 1\na 2\n").ok());               // duplicate sample
  EXPECT_FALSE(ParseExposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                               "h_sum 1\nh_count 1\n")
                   .ok());  // not cumulative
  EXPECT_FALSE(ParseExposition("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n")
                   .ok());  // no +Inf
  EXPECT_TRUE(ParseExposition("# a comment\na{b=\"\\\\\\\"\\n\"} -1.5e3 1700000000\n\n").ok());
}
