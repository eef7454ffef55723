#include "runtime/http/route_table.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace milesrt::runtime {
namespace {

/// The segments between '/'s of a path that starts with '/' ("/" has one empty segment).
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t at = 1;
  while (true) {
    size_t next = path.find('/', at);
    if (next == std::string_view::npos) {
      out.push_back(path.substr(at));
      return out;
    }
    out.push_back(path.substr(at, next - at));
    at = next + 1;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return false;
    int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

size_t route_table::add(http_method method, const std::string& pattern) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("route " + std::string(to_string(method)) + " " + pattern + ": " +
                                 why);
  };
  if (pattern.empty() || pattern[0] != '/') throw bad("a pattern starts with '/'");
  entry e{method, {}};
  std::set<std::string> names;
  for (auto s : split_path(pattern)) {
    bool opens = s.find('{') != std::string_view::npos;
    bool closes = s.find('}') != std::string_view::npos;
    if (!opens && !closes) {
      e.segments.push_back({std::string(s), false});
      continue;
    }
    if (s.size() < 2 || s.front() != '{' || s.back() != '}' ||
        !valid_name(s.substr(1, s.size() - 2)))
      throw bad("'" + std::string(s) +
                "' is not a parameter (a whole segment {name}, name of [A-Za-z0-9_])");
    std::string name(s.substr(1, s.size() - 2));
    if (!names.insert(name).second) throw bad("parameter {" + name + "} named twice");
    e.segments.push_back({name, true});
  }
  for (const auto& r : routes_) {
    if (r.method != method || r.segments.size() != e.segments.size()) continue;
    bool same = true;
    for (size_t i = 0; i < r.segments.size() && same; ++i) {
      const auto &a = r.segments[i], &b = e.segments[i];
      same = a.param == b.param && (a.param || a.text == b.text);
    }
    if (same) throw bad("already routed");
  }
  routes_.push_back(std::move(e));
  return routes_.size() - 1;
}

route_match route_table::match(http_method method, std::string_view path) const {
  route_match out;
  if (path.empty() || path[0] != '/') return out;
  const auto parts = split_path(path);
  const entry* best = nullptr;
  for (const auto& r : routes_) {
    if (r.segments.size() != parts.size()) continue;
    bool fits = true;
    for (size_t i = 0; i < parts.size() && fits; ++i)
      fits = r.segments[i].param ? !parts[i].empty() : r.segments[i].text == parts[i];
    if (!fits) continue;
    if (r.method != method) {
      if (std::find(out.allowed.begin(), out.allowed.end(), r.method) == out.allowed.end())
        out.allowed.push_back(r.method);
      continue;
    }
    // Literal before parameter, segment by segment from the left.
    if (best) {
      bool better = false;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (r.segments[i].param == best->segments[i].param) continue;
        better = !r.segments[i].param;
        break;
      }
      if (!better) continue;
    }
    best = &r;
  }
  if (!best) {
    out.what =
        out.allowed.empty() ? route_match::outcome::no_path : route_match::outcome::wrong_method;
    return out;
  }
  out.allowed.clear();
  out.index = static_cast<size_t>(best - routes_.data());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!best->segments[i].param) continue;
    std::string value;
    if (!percent_decode(parts[i], value)) {
      out.what = route_match::outcome::bad_path;
      out.problem = "path parameter {" + best->segments[i].text + "}: bad percent-encoding";
      return out;
    }
    out.params[best->segments[i].text] = std::move(value);
  }
  out.what = route_match::outcome::found;
  return out;
}

std::vector<http_method> route_table::methods(std::string_view path) const {
  std::vector<http_method> out;
  for (auto m : {http_method::get, http_method::post, http_method::del}) {
    auto found = match(m, path);
    if (found.what == route_match::outcome::found || found.what == route_match::outcome::bad_path)
      out.push_back(m);
  }
  return out;
}

}  // namespace milesrt::runtime
