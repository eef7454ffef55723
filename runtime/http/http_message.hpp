#pragma once
/// What a route of the HTTP server sees and answers: a parsed request, a response, a method.

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace milesrt::runtime {

/// The methods a route may serve. A GET route answers HEAD too (without a body).
enum class http_method { get, post, del };

/// "GET", "POST" or "DELETE".
const char* to_string(http_method m);

/// One request as a route sees it.
struct http_request {
  http_method method = http_method::get;
  /// The path as the client sent it (percent-encoded), without the query.
  std::string path;
  /// What follows '?' in the target, "" when nothing does.
  std::string query;
  /// The values of the route's `{name}` segments, percent-decoded.
  std::map<std::string, std::string> params;
  /// The header fields in the order received, names in lower case.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// The client's address and port ("127.0.0.1:51234").
  std::string remote;

  /// The value of the first header field named `name` (any case); "" when there is none.
  std::string header(std::string_view name) const;
  /// The value of path parameter `name`; throws std::out_of_range naming it when the route has
  /// no such segment (a bug in the route, not a bad request).
  const std::string& param(const std::string& name) const;
};

/// A whole answer: a status, a content type, a body and any extra header fields.
struct http_response {
  http_response() = default;
  http_response(unsigned status_, std::string content_type_, std::string body_)
      : status(status_), content_type(std::move(content_type_)), body(std::move(body_)) {}

  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  /// Extra header fields (`Retry-After`, `Allow`, ...).
  std::vector<std::pair<std::string, std::string>> headers;
};

}  // namespace milesrt::runtime
