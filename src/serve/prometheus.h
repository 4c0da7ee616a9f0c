#pragma once
// Prometheus text exposition (format 0.0.4): histograms with fixed buckets
// and a writer for gauges, counters and histograms with constant labels.
// Written here because no Debian package offers a C++ Prometheus client.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyllm::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

// vLLM's bucket helpers: 1, 2, 5, 10, 20, 50, ... up to max_value.
std::vector<double> buckets_1_2_5(double max_value);

class PrometheusWriter {
 public:
  explicit PrometheusWriter(Labels common) : common_(std::move(common)) {}

  void gauge(std::string_view name, std::string_view help, double value);
  // name without the _total suffix; the sample gets it.
  void counter(std::string_view name, std::string_view help, double value);
  // One counter with an extra label, one sample per (label value, count).
  void labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                        const std::vector<std::pair<std::string, double>>& values);
  void histogram(std::string_view name, std::string_view help, const Histogram& h);

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
