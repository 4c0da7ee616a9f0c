#include "bench/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hyllm::bench {
namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about n ticks.
double nice_step(double range, int n) {
  if (range <= 0) return 1;
  double raw = range / n, p = std::pow(10.0, std::floor(std::log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

}  // namespace

std::string render_svg(const PlotSpec& spec) {
  const double W = 720, H = 480, L = 80, R = 160, T = 50, B = 60;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool any = false;
  for (const auto& s : spec.series)
    for (const auto& p : s.points) {
      if (!any) {
        x0 = x1 = p.x;
        y1 = p.y;
        any = true;
      }
      x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y1 = std::max(y1, p.y);
    }
  x0 = std::min(0.0, x0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  double xs = nice_step(x1 - x0, 6), ys = nice_step(y1 - y0, 6);
  x1 = std::ceil(x1 / xs) * xs;
  y1 = std::ceil(y1 / ys) * ys;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H);
  o += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2,
                   escape(spec.title));
  for (double x = x0; x <= x1 + 1e-9; x += xs) {
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", px(x), T, H - B);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", px(x), H - B + 18, x);
  }
  for (double y = y0; y <= y1 + 1e-9; y += ys) {
    o += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", L, py(y), W - R);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", L - 6, py(y) + 4, y);
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 18,
                   escape(spec.x_label));
  o += fmt::format("<text transform=\"translate(20,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   (T + H - B) / 2, escape(spec.y_label));
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const auto& s = spec.series[i];
    const char* color = kColors[i % std::size(kColors)];
    std::string pts;
    for (const auto& p : s.points) pts += fmt::format("{:.1f},{:.1f} ", px(p.x), py(p.y));
    o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
    for (const auto& p : s.points) {
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", px(p.x), py(p.y), color);
      if (!p.label.empty())
        o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">{}</text>\n", px(p.x) + 6, py(p.y) - 6,
                         escape(p.label));
    }
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", W - R + 16,
                     T + 20 * static_cast<double>(i), color);
    o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - R + 34, T + 20 * static_cast<double>(i) + 10,
                     escape(s.name));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace hyllm::bench
