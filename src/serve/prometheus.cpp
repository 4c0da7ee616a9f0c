#include "serve/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hyllm::serve {

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

void PrometheusWriter::histogram(std::string_view name, std::string_view help, const hyllm::Histogram& h) {
  header(name, help, "histogram");
  std::string bucket = fmt::format("{}_bucket", name);
  // The engine counts per bucket; Prometheus buckets are cumulative.
  uint64_t running = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    running += i < h.counts.size() ? h.counts[i] : 0;
    sample(bucket, {{"le", format_sample_value(h.bounds[i])}}, static_cast<double>(running));
  }
  sample(bucket, {{"le", "+Inf"}}, static_cast<double>(h.count));
  sample(fmt::format("{}_count", name), {}, static_cast<double>(h.count));
  sample(fmt::format("{}_sum", name), {}, h.sum);
}

}  // namespace hyllm::serve
