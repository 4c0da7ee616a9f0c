#pragma once
// A small dependency-free SVG line plot (no plotting library is packaged for
// C++ in Debian that fits a CLI tool): one or more labelled series of points.

#include <string>
#include <vector>

namespace hyllm::bench {

struct PlotPoint {
  double x = 0, y = 0;
  std::string label;  // drawn next to the point, e.g. "c=8"
};

struct PlotSeries {
  std::string name;
  std::vector<PlotPoint> points;
};

struct PlotSpec {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
};

std::string render_svg(const PlotSpec& spec);

}  // namespace hyllm::bench
