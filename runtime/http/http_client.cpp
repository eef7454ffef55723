#include "runtime/http/http_client.hpp"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>
#include <thread>

#include "runtime/core/failure.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::runtime {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

}  // namespace

http_url parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    throw std::invalid_argument("https is not supported (use http://)");
  }
  if (url.rfind(scheme, 0) != 0) {
    throw std::invalid_argument("not an http:// URL");
  }
  http_url u;
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.target = rest.substr(slash);
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    u.port = authority.substr(colon + 1);
    authority = authority.substr(0, colon);
    if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(u.port) > 65535) {
      throw std::invalid_argument("bad port '" + u.port + "'");
    }
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);  // [::1]
  }
  if (authority.empty()) {
    throw std::invalid_argument("no host");
  }
  u.host = authority;
  return u;
}

http_reply http_post(const http_url& url, const std::string& body,
                     std::chrono::duration<double> timeout) {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::string_body> req{http::verb::post, url.target, 11};
  // Host names the port too unless it is HTTP's default (RFC 9110 7.2): servers that guard against
  // DNS rebinding (runtime/http's) refuse a Host without it.
  const std::string host =
      url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  req.set(http::field::host, url.port == "80" ? host : host + ":" + url.port);
  req.set(http::field::user_agent, "milesrt");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);

  // Every step is asynchronous so that one deadline covers resolve, connect, write and read.
  beast::error_code failure;
  std::string failed_step;
  bool done = false;
  auto fail = [&](beast::error_code ec, const char* step) {
    failure = ec;
    failed_step = step;
  };
  const auto deadline = std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  stream.expires_after(deadline);
  resolver.async_resolve(
      url.host, url.port, [&](beast::error_code ec, tcp::resolver::results_type results) {
        if (ec) return fail(ec, "resolve");
        stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return fail(ec, "connect");
          http::async_write(stream, req, [&](beast::error_code ec, size_t) {
            if (ec) return fail(ec, "send");
            http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) {
              if (ec) return fail(ec, "read the answer");
              done = true;
            });
          });
        });
      });
  ioc.run_for(deadline);
  if (!done && !failure) {
    resolver.cancel();
    beast::error_code ignored;
    stream.socket().close(ignored);
    throw std::runtime_error("timed out after " + seconds_text(timeout.count()));
  }
  if (failure) {
    if (failure == beast::error::timeout) {
      throw std::runtime_error("timed out after " + seconds_text(timeout.count()) + " (" +
                               failed_step + ")");
    }
    throw std::runtime_error("cannot " + failed_step + ": " + failure.message());
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto res = parser.release();
  return {res.result_int(), std::move(res.body())};
}

http_reply http_post_retrying(const http_url& url, const std::string& body,
                              const retry_policy& policy, const std::string& where) {
  const uint32_t attempts = policy.retries + 1;
  double backoff = policy.backoff_seconds;
  std::string last;
  for (uint32_t attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff = std::min(backoff * 2, 5.0);
    }
    http_reply res;
    try {
      res = http_post(url, body, std::chrono::duration<double>(policy.timeout_seconds));
    } catch (const std::runtime_error& e) {
      last = e.what();
      continue;
    }
    if (res.status < 500) return res;
    last =
        "HTTP " + std::to_string(res.status) + (res.body.empty() ? "" : ": " + excerpt(res.body));
  }
  fail(errc::transient, where + ": " + last + " (" + std::to_string(attempts) +
                            (attempts == 1 ? " attempt)" : " attempts)"));
}

}  // namespace milesrt::runtime
