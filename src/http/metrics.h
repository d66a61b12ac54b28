// A small Prometheus metrics registry: counters, gauges and fixed-bucket
// histograms, with or without labels, rendered in the text exposition
// format 0.0.4. No external library: hutchd needs a handful of metrics,
// not a client library with its own threads and global state.
//
// A Registry owns its metric families; the references it hands out stay
// valid as long as it lives. Nothing here locks: like the rest of the API
// layer it is touched only on the I/O thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hutch::api {

class Counter {
 public:
  void Inc(uint64_t n = 1) { v_ += n; }
  Counter& operator++() {
    ++v_;
    return *this;
  }
  uint64_t value() const { return v_; }

 private:
  uint64_t v_ = 0;
};

class Gauge {
 public:
  void Set(double v) { v_ = v; }
  void Add(double d) { v_ += d; }
  Gauge& operator++() {
    v_ += 1;
    return *this;
  }
  Gauge& operator--() {
    v_ -= 1;
    return *this;
  }
  double value() const { return v_; }

 private:
  double v_ = 0;
};

// Counts one open thing (a stream, a terminal) on a gauge for as long as it
// lives, so every way out of a handler, co_return or exception, gives it back.
class GaugeHold {
 public:
  explicit GaugeHold(Gauge& g) : g_(g) { ++g_; }
  ~GaugeHold() { --g_; }
  GaugeHold(const GaugeHold&) = delete;
  GaugeHold& operator=(const GaugeHold&) = delete;

 private:
  Gauge& g_;
};

// Counts observations into buckets with fixed upper bounds (the +Inf
// bucket is implicit), plus their sum and count.
class Histogram {
 public:
  // `upper_bounds` must be strictly increasing and finite.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations per bucket, not cumulative; the last entry is +Inf.
  const std::vector<uint64_t>& bucket_counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// One metric name with a fixed set of label names; a child per distinct
// tuple of label values, made on first use.
template <typename M>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::vector<double> bounds)
      : label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}
  // The child for these label values (in the order of the label names).
  // A wrong number of values is a programming error and aborts.
  M& With(const std::vector<std::string>& values);
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Ordered by label values, so the rendered output is stable.
  const std::map<std::vector<std::string>, std::unique_ptr<M>>& children() const {
    return children_;
  }

 private:
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;  // histograms only
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

class Registry {
 public:
  // Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]* and be unique; anything else aborts at start-up
  // (a typo in our own code, not an input error).
  Counter& AddCounter(const std::string& name, const std::string& help);
  Gauge& AddGauge(const std::string& name, const std::string& help);
  Histogram& AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds);
  Family<Counter>& AddCounterFamily(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names);
  Family<Gauge>& AddGaugeFamily(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names);

  // Every family in registration order, as Prometheus text format 0.0.4.
  std::string Render() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    MetricType type;
    std::unique_ptr<Family<Counter>> counters;
    std::unique_ptr<Family<Gauge>> gauges;
    std::unique_ptr<Family<Histogram>> histograms;
  };
  Entry& Add(const std::string& name, const std::string& help, MetricType type,
             const std::vector<std::string>& label_names);

  std::vector<Entry> entries_;
};

// Escapes a label value for the exposition format: backslash, double
// quote and line feed.
std::string EscapeLabelValue(std::string_view v);
// A sample value as Prometheus parses it (Go float syntax, +Inf, NaN).
std::string FormatSampleValue(double v);

}  // namespace hutch::api
