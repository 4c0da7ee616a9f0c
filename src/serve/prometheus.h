#pragma once
// Prometheus text exposition (format 0.0.4): gauges, counters and histograms
// with constant labels. Written here because no Debian package offers a C++
// Prometheus client.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine_stats.h"

namespace hyllm::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusWriter {
 public:
  explicit PrometheusWriter(Labels common) : common_(std::move(common)) {}

  void gauge(std::string_view name, std::string_view help, double value);
  // name without the _total suffix; the sample gets it.
  void counter(std::string_view name, std::string_view help, double value);
  // One counter with an extra label, one sample per (label value, count).
  void labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                        const std::vector<std::pair<std::string, double>>& values);
  void histogram(std::string_view name, std::string_view help, const hyllm::Histogram& h);

  const std::string& text() const { return out_; }

 private:
  void header(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, const Labels& extra, double value);

  Labels common_;
  std::string out_;
};

std::string escape_label_value(std::string_view value);
std::string format_sample_value(double value);

}  // namespace hyllm::serve
