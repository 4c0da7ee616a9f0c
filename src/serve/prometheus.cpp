#include "serve/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hyllm::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard lock(mu_);
  counts_[bucket] += 1;
  sum_ += value;
  count_ += 1;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> buckets_1_2_5(double max_value) {
  std::vector<double> out;
  for (double exponent = 1;; exponent *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      double v = m * exponent;
      if (v > max_value) return out;
      out.push_back(v);
    }
  }
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Python's client prints floats with a decimal point ("3.0").
  if (std::floor(value) == value && std::fabs(value) < 1e15) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

void PrometheusWriter::header(std::string_view name, std::string_view help, std::string_view type) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusWriter::sample(std::string_view name, const Labels& extra, double value) {
  out_ += name;
  out_ += '{';
  bool first = true;
  auto add = [&](const auto& kv) {
    if (!first) out_ += ',';
    first = false;
    out_ += fmt::format("{}=\"{}\"", kv.first, escape_label_value(kv.second));
  };
  for (const auto& kv : extra) add(kv);
  for (const auto& kv : common_) add(kv);
  out_ += "} ";
  out_ += format_sample_value(value);
  out_ += '\n';
}

void PrometheusWriter::gauge(std::string_view name, std::string_view help, double value) {
  header(name, help, "gauge");
  sample(name, {}, value);
}

void PrometheusWriter::counter(std::string_view name, std::string_view help, double value) {
  header(name, help, "counter");
  sample(fmt::format("{}_total", name), {}, value);
}

void PrometheusWriter::labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                                        const std::vector<std::pair<std::string, double>>& values) {
  header(name, help, "counter");
  for (const auto& [label_value, v] : values) {
    sample(fmt::format("{}_total", name), {{std::string(label), label_value}}, v);
  }
}

void PrometheusWriter::histogram(std::string_view name, std::string_view help, const Histogram& h) {
  header(name, help, "histogram");
  auto s = h.snapshot();
  std::string bucket = fmt::format("{}_bucket", name);
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    sample(bucket, {{"le", format_sample_value(s.upper_bounds[i])}}, static_cast<double>(s.cumulative[i]));
  }
  sample(bucket, {{"le", "+Inf"}}, static_cast<double>(s.cumulative.back()));
  sample(fmt::format("{}_count", name), {}, static_cast<double>(s.count));
  sample(fmt::format("{}_sum", name), {}, s.sum);
}

}  // namespace hyllm::serve
