#pragma once
/// A small blocking HTTP/1.1 client (Boost.Beast) for the servers actors talk to: POST a JSON
/// body, get the answer, with a deadline per attempt. Call it from detached actors or plain
/// threads only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace milesrt::runtime {

/// http://host[:port][/path]
struct http_url {
  std::string host;
  std::string port = "80";
  std::string target = "/";
};

/// Parses an http:// URL; throws std::invalid_argument (bad input) saying why when it is not one
/// (https is not supported).
http_url parse_http_url(const std::string& url);

/// What a server answered to a POST.
struct http_reply {
  unsigned status = 0;
  std::string body;
};

/// POSTs `body` (application/json) and reads the answer, all within `timeout`. Throws
/// std::runtime_error naming the problem ("timed out after 2s", "connection refused", ...).
http_reply http_post(const http_url& url, const std::string& body,
                     std::chrono::duration<double> timeout);

/// How http_post_retrying tries again.
struct retry_policy {
  uint32_t retries = 0;         ///< attempts after the first
  double backoff_seconds = 0;   ///< the wait before the second attempt, doubled after (<= 5 s)
  double timeout_seconds = 30;  ///< each attempt's
};

/// http_post, again after a failed connection or a 5xx answer, as `policy` says. Returns the
/// first answer below 500 (the caller judges its status); when every attempt failed, throws a
/// transient failure "`where`: <the last problem> (N attempts)".
http_reply http_post_retrying(const http_url& url, const std::string& body,
                              const retry_policy& policy, const std::string& where);

}  // namespace milesrt::runtime
