#pragma once
/// Fields of the JSON lines `milesrt generate`, `score` and `tokenize` read, taken exactly: a
/// value of another type, a fraction where an integer belongs or a number outside its range is
/// refused with std::invalid_argument naming the field, never converted, wrapped or truncated.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/untrusted_text.hpp"

namespace milesrt::app::fields {

/// One input line parsed, its nesting bounded first: a 100,000-deep value parses (nlohmann's
/// parser is iterative) but overflows the stack when a message quotes it or it is copied.
template <class Json>
Json parse_line(const std::string& line) {
  if (auto deep = runtime::json_nesting_problem(line); !deep.empty())
    throw std::invalid_argument(deep);
  return Json::parse(line);
}

/// A JSON value as the message quotes it (invalid UTF-8 replaced, long values cut).
template <class Json>
std::string quote(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

/// An exception's message without nlohmann's "[json.exception.parse_error.101] " tag.
inline std::string message(const std::exception& e) {
  std::string m = e.what();
  if (m.rfind("[json.exception.", 0) == 0) {
    auto close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  return m;
}

/// `v` (named `name`) as an integer from `lo` to `hi`.
template <class Json>
int64_t integer(const Json& v, const std::string& name, int64_t lo, int64_t hi) {
  auto refuse = [&] {
    return std::invalid_argument("'" + name + "' must be an integer from " + std::to_string(lo) +
                                 " to " + std::to_string(hi) + ", got " + quote(v));
  };
  if (v.is_number_unsigned()) {
    const auto u = v.template get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) throw refuse();
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) throw refuse();
  const auto x = v.template get<int64_t>();
  if (x < lo || x > hi) throw refuse();
  return x;
}

/// `j[key]` as an integer from `lo` to `hi`; `fallback` when absent or null.
template <class Json>
int64_t integer(const Json& j, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return integer(*it, key, lo, hi);
}

/// `j[key]` as a seed: an integer from 0 to 2^64 - 1; 0 when absent or null.
template <class Json>
uint64_t seed(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_unsigned()) return it->template get<uint64_t>();
  if (it->is_number_integer() && it->template get<int64_t>() >= 0)
    return static_cast<uint64_t>(it->template get<int64_t>());
  throw std::invalid_argument("'" + std::string(key) +
                              "' must be an integer from 0 to 18446744073709551615, got " +
                              quote(*it));
}

/// `j[key]` as a finite number from `lo` to `hi` (above `lo` when `lo_open`); `fallback` when
/// absent or null.
template <class Json>
double number(const Json& j, const char* key, double fallback, double lo, double hi,
              bool lo_open = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  const double x = it->is_number() ? it->template get<double>() : std::nan("");
  if (!(std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi)) {
    auto num = [](double d) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", d);
      return std::string(buf);
    };
    throw std::invalid_argument(
        "'" + std::string(key) + "' must be a number " + (lo_open ? "above " : "from ") + num(lo) +
        (lo_open ? ", at most " : " to ") + num(hi) + ", got " + quote(*it));
  }
  return x;
}

/// `j[key]` as true or false; `fallback` when absent or null.
template <class Json>
bool boolean(const Json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw std::invalid_argument("'" + std::string(key) + "' must be true or false, got " +
                                quote(*it));
  return it->template get<bool>();
}

/// `j[key]` as a string.
template <class Json>
const std::string& string(const Json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_string())
    throw std::invalid_argument("'" + std::string(key) + "' must be a string, got " + quote(v));
  return v.template get_ref<const std::string&>();
}

/// `j[key]` as a list of token ids, each from 0 to vocab - 1.
template <class Json>
std::vector<int64_t> ids(const Json& j, const char* key, int64_t vocab) {
  const auto& v = j.at(key);
  if (!v.is_array())
    throw std::invalid_argument("'" + std::string(key) + "' must be a list of token ids, got " +
                                quote(v));
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(integer(v[i], std::string(key) + "[" + std::to_string(i) + "]", 0, vocab - 1));
  return out;
}

/// `j[key]` as a list of strings.
template <class Json>
std::vector<std::string> strings(const Json& j, const char* key) {
  const auto& v = j.at(key);
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_string()) break;
      out.push_back(x.template get<std::string>());
    }
    if (out.size() == v.size()) return out;
  }
  throw std::invalid_argument("'" + std::string(key) + "' must be a list of strings, got " +
                              quote(v));
}

}  // namespace milesrt::app::fields
