#pragma once
/// The routes of an HTTP server: a method and a path pattern whose segments are literal text or
/// `{name}` (one whole, non-empty segment: `/sessions/{id}/end`), matched against a request's
/// path. Where several patterns match, the one with a literal segment where the others have a
/// parameter wins, segment by segment from the left (`/sessions/stats` before `/sessions/{id}`).

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/http/http_message.hpp"

namespace milesrt::runtime {

/// What a path and a method found.
struct route_match {
  enum class outcome {
    found,         ///< `index` is the route; `params` its parameters
    no_path,       ///< no pattern matches the path (404)
    wrong_method,  ///< patterns match the path, for other methods: `allowed` (405)
    bad_path,      ///< a parameter's percent-encoding is broken: `problem` (400)
  };
  outcome what = outcome::no_path;
  size_t index = 0;
  std::map<std::string, std::string> params;
  std::vector<http_method> allowed;
  std::string problem;
};

class route_table {
 public:
  /// Adds `pattern` for `method` and returns its index (0, 1, ... in the order added). Throws
  /// std::invalid_argument naming the pattern when it does not start with '/', has a malformed or
  /// repeated `{name}`, or is already there for this method (parameter names aside).
  size_t add(http_method method, const std::string& pattern);
  /// The route for `method` (HEAD is asked as GET) and `path` (percent-encoded, no query).
  route_match match(http_method method, std::string_view path) const;
  /// The methods whose patterns match `path`, each once.
  std::vector<http_method> methods(std::string_view path) const;
  size_t size() const { return routes_.size(); }

 private:
  struct segment {
    std::string text;  ///< the literal, or the parameter's name
    bool param = false;
  };
  struct entry {
    http_method method;
    std::vector<segment> segments;
  };
  std::vector<entry> routes_;
};

/// `text` with each %XX replaced by its byte; false (and `out` unspecified) on a '%' not followed
/// by two hex digits.
bool percent_decode(std::string_view text, std::string& out);

}  // namespace milesrt::runtime
