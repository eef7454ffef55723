#include "runtime/metrics/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace milesrt::runtime {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  if (std::fabs(v) >= 1000 || (std::fabs(v) < 0.01 && v != 0))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

void write_svg_plot(const std::filesystem::path& metrics_jsonl,
                    const std::vector<std::string>& metrics, const std::filesystem::path& out,
                    const std::string& title) {
  std::ifstream in(metrics_jsonl);
  if (!in) throw std::runtime_error("cannot read " + metrics_jsonl.string());
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  std::string line;
  double max_step = 1;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("metrics")) continue;
    const double step = j["step"].get<double>();
    max_step = std::max(max_step, step);
    for (const auto& m : metrics) {
      if (j["metrics"].contains(m) && j["metrics"][m].is_number()) {
        series[m].push_back({step, j["metrics"][m].get<double>()});
      }
    }
  }
  const int width = 720, panel = 180, top = 40, left = 70, right = 20, gap = 30;
  const int height = top + static_cast<int>(metrics.size()) * (panel + gap) + 20;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"};
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << escape(title) << "</text>\n";
  for (size_t i = 0; i < metrics.size(); ++i) {
    const auto& name = metrics[i];
    const int y0 = top + static_cast<int>(i) * (panel + gap);
    const int w = width - left - right;
    svg << "<rect x=\"" << left << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << panel
        << "\" fill=\"none\" stroke=\"#888\"/>\n";
    svg << "<text x=\"" << left + 6 << "\" y=\"" << y0 + 15 << "\" font-weight=\"bold\">"
        << escape(name) << "</text>\n";
    const auto& pts = series[name];
    if (pts.empty()) {
      svg << "<text x=\"" << left + w / 2 << "\" y=\"" << y0 + panel / 2
          << "\" text-anchor=\"middle\" fill=\"#888\">no values</text>\n";
      continue;
    }
    double lo = pts[0].second, hi = pts[0].second;
    for (const auto& p : pts) {
      lo = std::min(lo, p.second);
      hi = std::max(hi, p.second);
    }
    if (hi - lo < 1e-12) {
      lo -= 0.5;
      hi += 0.5;
    }
    auto X = [&](double s) { return left + (s / max_step) * w; };
    auto Y = [&](double v) { return y0 + panel - 8 - (v - lo) / (hi - lo) * (panel - 26); };
    svg << "<polyline fill=\"none\" stroke=\"" << colors[i % 6]
        << "\" stroke-width=\"1.5\" points=\"";
    for (const auto& p : pts) svg << num(X(p.first)) << "," << num(Y(p.second)) << " ";
    svg << "\"/>\n";
    if (pts.size() < 60) {
      for (const auto& p : pts) {
        svg << "<circle cx=\"" << num(X(p.first)) << "\" cy=\"" << num(Y(p.second))
            << "\" r=\"2.5\" fill=\"" << colors[i % 6] << "\"/>\n";
      }
    }
    svg << "<text x=\"" << left - 6 << "\" y=\"" << num(Y(hi) + 4) << "\" text-anchor=\"end\">"
        << num(hi) << "</text>\n<text x=\"" << left - 6 << "\" y=\"" << num(Y(lo) + 4)
        << "\" text-anchor=\"end\">" << num(lo) << "</text>\n";
    svg << "<text x=\"" << left + w << "\" y=\"" << y0 + panel + 14
        << "\" text-anchor=\"end\">step " << static_cast<long long>(max_step) << "</text>\n";
  }
  svg << "</svg>\n";
  std::ofstream o(out);
  o << svg.str();
  o.flush();
  if (!o) throw std::runtime_error("cannot write " + out.string());
}

}  // namespace milesrt::runtime
