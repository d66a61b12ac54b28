// A strict reader of the Prometheus text exposition format 0.0.4, for tests:
// it checks every line (HELP/TYPE comments, metric and label names, label
// value escapes, sample values), that each family's TYPE comes before its
// samples and only once, and that histograms are well formed (cumulative
// buckets ending in le="+Inf" equal to _count). What Prometheus would
// reject, this rejects.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hutch::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct PromParse {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types;  // family name -> counter|gauge|histogram|…
  std::string error;                         // empty when the whole text is valid
  bool ok() const { return error.empty(); }
  // The value of the sample with exactly these labels, if present.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const;
};

PromParse ParseExposition(const std::string& text);

}  // namespace hutch::testing
