#include "http/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace hutch::api {

namespace {

[[noreturn]] void Die(const std::string& what) {
  // Metric names are compile-time constants of hutchd: a bad one is a bug
  // that must not start a server with a half-valid /metrics.
  std::fprintf(stderr, "hutchd: metrics: %s\n", what.c_str());
  std::abort();
}

bool ValidName(std::string_view s, bool colon_ok) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

// `{a="x",b="y"}` (with an extra `le` pair for histogram buckets), or
// nothing for a metric without labels.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string* le = nullptr) {
  if (names.empty() && !le) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out.push_back(',');
    out += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (le) {
    if (!names.empty()) out.push_back(',');
    out += "le=\"" + *le + "\"";
  }
  out.push_back('}');
  return out;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

std::string FormatSampleValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Shortest representation that round-trips: "3", "0.005", "1e+30".
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i] > bounds_[i - 1])))
      Die("histogram bounds must be finite and strictly increasing");
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;  // a bucket counts values <= its bound
  ++counts_[i];
  ++count_;
  sum_ += v;
}

template <typename M>
M& Family<M>::With(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) Die("wrong number of label values");
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<M> m;
  if constexpr (std::is_same_v<M, Histogram>) m = std::make_unique<Histogram>(bounds_);
  else m = std::make_unique<M>();
  M& ref = *m;
  children_.emplace(values, std::move(m));
  return ref;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Entry& Registry::Add(const std::string& name, const std::string& help, MetricType type,
                               const std::vector<std::string>& label_names) {
  if (!ValidName(name, true)) Die("invalid metric name '" + name + "'");
  for (const auto& e : entries_)
    if (e.name == name) Die("metric '" + name + "' registered twice");
  for (const auto& l : label_names)
    if (!ValidName(l, false) || l.rfind("__", 0) == 0 ||
        (type == MetricType::kHistogram && l == "le"))
      Die("invalid label name '" + l + "' on '" + name + "'");
  entries_.push_back(Entry{name, help, type, nullptr, nullptr, nullptr});
  return entries_.back();
}

Counter& Registry::AddCounter(const std::string& name, const std::string& help) {
  return AddCounterFamily(name, help, {}).With({});
}

Gauge& Registry::AddGauge(const std::string& name, const std::string& help) {
  return AddGaugeFamily(name, help, {}).With({});
}

Histogram& Registry::AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> upper_bounds) {
  Entry& e = Add(name, help, MetricType::kHistogram, {});
  e.histograms =
      std::make_unique<Family<Histogram>>(std::vector<std::string>{}, std::move(upper_bounds));
  return e.histograms->With({});
}

Family<Counter>& Registry::AddCounterFamily(const std::string& name, const std::string& help,
                                            std::vector<std::string> label_names) {
  Entry& e = Add(name, help, MetricType::kCounter, label_names);
  e.counters = std::make_unique<Family<Counter>>(std::move(label_names), std::vector<double>{});
  return *e.counters;
}

Family<Gauge>& Registry::AddGaugeFamily(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names) {
  Entry& e = Add(name, help, MetricType::kGauge, label_names);
  e.gauges = std::make_unique<Family<Gauge>>(std::move(label_names), std::vector<double>{});
  return *e.gauges;
}

std::string Registry::Render() const {
  std::string out;
  for (const auto& e : entries_) {
    out += "# HELP " + e.name + " " + EscapeHelp(e.help) + "\n";
    out += "# TYPE " + e.name + " " + TypeName(e.type) + "\n";
    switch (e.type) {
      case MetricType::kCounter:
        for (const auto& [values, c] : e.counters->children())
          out += e.name + LabelSet(e.counters->label_names(), values) + " " +
                 std::to_string(c->value()) + "\n";
        break;
      case MetricType::kGauge:
        for (const auto& [values, g] : e.gauges->children())
          out += e.name + LabelSet(e.gauges->label_names(), values) + " " +
                 FormatSampleValue(g->value()) + "\n";
        break;
      case MetricType::kHistogram:
        for (const auto& [values, h] : e.histograms->children()) {
          const auto& names = e.histograms->label_names();
          uint64_t cumulative = 0;
          for (size_t i = 0; i <= h->upper_bounds().size(); ++i) {
            cumulative += h->bucket_counts()[i];
            std::string le =
                i < h->upper_bounds().size() ? FormatSampleValue(h->upper_bounds()[i]) : "+Inf";
            out += e.name + "_bucket" + LabelSet(names, values, &le) + " " +
                   std::to_string(cumulative) + "\n";
          }
          out +=
              e.name + "_sum" + LabelSet(names, values) + " " + FormatSampleValue(h->sum()) + "\n";
          out +=
              e.name + "_count" + LabelSet(names, values) + " " + std::to_string(h->count()) + "\n";
        }
        break;
    }
  }
  return out;
}

}  // namespace hutch::api
