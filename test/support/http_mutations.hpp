#pragma once
// Mutated HTTP requests for the fuzz tests (test/http_fuzz.test.cpp): a valid request mutated in
// its path, method, header fields, framing and body, and the judgement of an answer to it.
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/fuzz.hpp"
#include "test/support/raw_http.hpp"

namespace milesrt::testing {

/// A request to send, and what it owes: a broken one (framing no server can read whole) may be
/// closed on without an answer.
struct request {
  std::string method = "GET", target = "/", body;
  std::vector<std::pair<std::string, std::string>> fields;  ///< Host included
  bool content_length = true;  ///< a Content-Length for the body is added
  bool broken = false;
  bool half_close = false;  ///< the sending side is shut after the request (it is incomplete)
  std::string garble;       ///< a wire-level mutation applied last ("" for none)
  std::vector<std::string> did;
};

inline request base_request(const std::string& method, const std::string& target, uint16_t port,
                            std::string body = "") {
  request q;
  q.method = method;
  q.target = target;
  q.body = std::move(body);
  q.fields = {{"Host", "127.0.0.1:" + std::to_string(port)}, {"User-Agent", "fuzz"}};
  if (!q.body.empty()) q.fields.emplace_back("Content-Type", "application/json");
  q.fields.emplace_back("Connection", "close");
  return q;
}

inline std::string wire(const request& q) {
  std::string s = q.method + " " + q.target + " HTTP/1.1\r\n";
  for (const auto& [n, v] : q.fields) s += n + ": " + v + "\r\n";
  if (q.content_length && (!q.body.empty() || q.method == "POST"))
    s += "Content-Length: " + std::to_string(q.body.size()) + "\r\n";
  return s + "\r\n" + q.body;
}

/// JSON with the string "@RAW@" replaced by `raw` (a token no JSON writer would write).
inline std::string with_raw(const nlohmann::json& j, const std::string& raw) {
  std::string s = j.dump();
  const auto at = s.find("\"@RAW@\"");
  return at == std::string::npos ? s : s.replace(at, 7, raw);
}

inline const std::vector<std::string> kOddTokens = {"1e400",
                                                    "-1e400",
                                                    "18446744073709551615",
                                                    "-9223372036854775809",
                                                    "NaN",
                                                    "Infinity",
                                                    "-0",
                                                    "1e-400",
                                                    "0x10",
                                                    "[]",
                                                    "{}",
                                                    "null",
                                                    "true",
                                                    "\"\"",
                                                    "\"\\ud800\"",
                                                    "\"\xff\xfe\"",
                                                    "[[[[",
                                                    "\"\\u0000\""};
inline const std::vector<std::string> kBadUtf8 = {
    "\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82"};
inline const std::vector<std::string> kJsonTokens = {
    "{", "}", "[", "]", ",", ":", "\"", "null", "1e999", "\\u0000", "\\ud800"};

/// The body mutated: a value replaced by an odd token, bytes that are no UTF-8 in a string,
/// 100,000-deep nesting, a text mutation, an empty or an over-limit body.
inline std::string mutate_body(const std::string& body, fuzz_rng& r,
                               std::vector<std::string>& did) {
  // A body mutated already into a huge or deep one is only cut: parsing, dumping and regex
  // matching recurse on it.
  if (body.size() > 4096) {
    did.push_back("body: cut");
    return body.substr(0, pick(r, body.size()));
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  switch (pick(r, 7)) {
    case 0: {
      if (!j.is_object() || j.empty()) break;
      auto it = j.begin();
      std::advance(it, static_cast<long>(pick(r, j.size())));
      const std::string key = pick(r, 4) == 0 ? "max_tokens" : it.key();
      j[key] = "@RAW@";
      const auto& tok = kOddTokens[pick(r, kOddTokens.size())];
      did.push_back("body." + key + "=" + printable(tok));
      return with_raw(j, tok);
    }
    case 1: {
      const auto at = body.find('"', pick(r, body.size() + 1));
      if (at == std::string::npos) break;
      did.push_back("body: bytes that are no UTF-8");
      return std::string(body).insert(at + 1, kBadUtf8[pick(r, kBadUtf8.size())]);
    }
    case 2: {
      const size_t depth = 100000;
      did.push_back("body: 100,000 levels deep");
      const std::string nest =
          std::string(depth, '[') + (pick(r, 2) ? std::string(depth, ']') : "");
      if (pick(r, 2) == 0) return nest;
      return std::string(body).insert(body.rfind('}') == std::string::npos ? 0 : body.rfind('}'),
                                      ", \"x\": " + nest);
    }
    case 3:
      did.push_back("body: empty");
      return "";
    case 4:
      did.push_back("body: over 1 MiB");
      return body + std::string((1 << 20) + 10, ' ');
    default:
      break;
  }
  did.push_back("body: text mutation");
  return mutate_text(body, r, kJsonTokens);  // once: a long result is not matched again
}

/// A path mutated: escapes, length, dot segments, junk after a session id, raw bytes.
inline void mutate_path(request& q, fuzz_rng& r) {
  static const std::vector<std::string> escapes = {"%FF",    "%00", "%2e%2e/", "%",  "%zz",
                                                   "%C0%AF", "%2F", "%u0041",  "%%", "%E2%82"};
  std::string& t = q.target;
  switch (pick(r, 8)) {
    case 0:
      t.insert(pick(r, t.size() + 1), escapes[pick(r, escapes.size())]);
      break;
    case 1:
      t += std::string(1000 + pick(r, 30000), 'a');
      break;
    case 2:
      t = std::vector<std::string>{
          "/sessions/../health",     "/./health", "//health",
          "/sessions/%2e%2e/health", "/health/",  "/health/.."}[pick(r, 6)];
      break;
    case 3:
      t = std::vector<std::string>{"/v1/chat/completions",
                                   "/sessions/x/v2/models",
                                   "/favicon.ico",
                                   "/metrics",
                                   "/api/steps",
                                   "/sessions/",
                                   "/"}[pick(r, 7)];
      break;
    case 4:
      t += std::vector<std::string>{"%00", "/..", "x", "/v1", "/end/end", ";x"}[pick(r, 6)];
      break;
    case 5:
      t += std::vector<std::string>{"?tokens=1&tokens=%FF",
                                    "?since=-1",
                                    "?since=99999999999999999999",
                                    "?",
                                    "?&&&=",
                                    "#frag"}[pick(r, 6)];
      break;
    case 6:  // raw bytes no request line may carry
      t.insert(pick(r, t.size() + 1), std::string(1, "\x01\x7f\xff \t"[pick(r, 5)]));
      q.broken = q.half_close = true;
      break;
    default:
      t = "http://127.0.0.1" + t;
      break;
  }
  q.did.push_back("path " + printable(t, 80));
}

inline void mutate_method(request& q, fuzz_rng& r) {
  static const std::vector<std::string> methods = {"PUT", "PATCH", "OPTIONS", "HEAD", "TRACE",
                                                   "get", "GETT",  "DELETE",  "POST", "GET"};
  if (pick(r, 6) == 0) {
    q.method = pick(r, 2) ? std::string(5000, 'A') : "G\x01T";
    q.broken = q.half_close = true;
  } else {
    q.method = methods[pick(r, methods.size())];
  }
  q.did.push_back("method " + printable(q.method, 20));
}

/// Header fields mutated: huge, many, duplicated, invalid bytes, Host wrong or missing, bad
/// Content-Length, chunked bodies (well-formed or junk), Expect.
inline void mutate_fields(request& q, fuzz_rng& r) {
  auto& f = q.fields;
  const size_t k = pick(r, 11);
  q.did.push_back("fields #" + std::to_string(k));
  switch (k) {
    case 0:
      f.emplace_back("X-Big", std::string(1000 + pick(r, 30000), 'v'));
      break;
    case 1:
      for (int i = 0; i < 300; ++i) f.emplace_back("X-Many-" + std::to_string(i), "yes");
      break;
    case 2:
      f.push_back(f.front());
      f.back().second = pick(r, 2) ? "evil.example:80" : f.front().second;
      break;
    case 3:
      f.emplace_back(pick(r, 2) ? "X-\x01"
                                  "Bad"
                                : "X-Bad",
                     pick(r, 2) ? std::string("\xff\xfe") : std::string("a\0b", 3));
      q.broken = q.half_close = true;
      break;
    case 4:
      f.front().second = std::vector<std::string>{"", "evil.example", "127.0.0.1", "localhost:1",
                                                  "127.0.0.1:99999"}[pick(r, 5)];
      if (pick(r, 2)) f.erase(f.begin());
      break;
    case 5:
      q.content_length = false;
      f.emplace_back("Content-Length", std::vector<std::string>{"-1", "abc", "99999999999999999999",
                                                                "1e3", "0x10", ""}[pick(r, 6)]);
      q.broken = q.half_close = true;
      break;
    case 6:  // a length past the body: the server waits for bytes that never come
      q.content_length = false;
      f.emplace_back("Content-Length", std::to_string(q.body.size() + 1 + pick(r, 1000)));
      q.broken = q.half_close = true;
      break;
    case 7:
      q.content_length = false;
      f.emplace_back("Content-Length", std::to_string(q.body.size()));
      f.emplace_back("Content-Length", std::to_string(q.body.size() + 1));
      q.broken = q.half_close = true;
      break;
    case 8: {  // chunked, well-formed
      q.content_length = false;
      f.emplace_back("Transfer-Encoding", "chunked");
      std::string b;
      for (size_t at = 0; at < q.body.size(); at += 7) {
        const auto part = q.body.substr(at, 7);
        char size[16];
        std::snprintf(size, sizeof size, "%zx", part.size());
        b += std::string(size) + "\r\n" + part + "\r\n";
      }
      q.body = b + "0\r\n\r\n";
      break;
    }
    case 9:
      q.content_length = pick(r, 2) == 0;
      f.emplace_back("Transfer-Encoding", pick(r, 2) ? "chunked" : "chunked, gzip");
      q.body =
          std::vector<std::string>{"zz\r\nabc\r\n0\r\n\r\n", "ffffffffffffffffff\r\nx\r\n",
                                   "5\r\nab", "-1\r\n\r\n", "3\r\nabcdef\r\n0\r\n\r\n"}[pick(r, 5)];
      q.broken = q.half_close = true;
      break;
    default:
      f.emplace_back("Expect", "100-continue");
      break;
  }
}

/// Wire-level damage, applied last: the request cut, bytes flipped, line ends bare, garbage.
inline std::string garble(std::string w, fuzz_rng& r, request& q) {
  q.broken = q.half_close = true;
  switch (pick(r, 4)) {
    case 0:
      q.did.push_back("cut");
      return w.substr(0, pick(r, w.size()));
    case 1:
      q.did.push_back("bytes flipped");
      for (size_t i = 0, n = 1 + pick(r, 4); i < n && !w.empty(); ++i)
        w[pick(r, std::min<size_t>(w.size(), 200))] = static_cast<char>(pick(r, 256));
      return w;
    case 2: {
      q.did.push_back("bare LF");
      for (size_t at; (at = w.find("\r\n")) != std::string::npos;) w.erase(at, 1);
      return w;
    }
    default: {
      q.did.push_back("garbage");
      std::string g(1 + pick(r, 3000), '\0');
      for (auto& c : g) c = static_cast<char>(pick(r, 256));
      return g;
    }
  }
}

/// Mutates `q` one to three ways; its bytes on the wire.
inline std::string mutated_wire(request q, fuzz_rng& r, request& out) {
  const bool garbled = pick(r, 10) == 0;
  for (size_t i = 0, n = 1 + pick(r, 3); i < n; ++i) {
    switch (pick(r, 4)) {
      case 0:
        mutate_path(q, r);
        break;
      case 1:
        mutate_method(q, r);
        break;
      case 2:
        mutate_fields(q, r);
        break;
      default:
        if (!q.body.empty() || q.method == "POST") q.body = mutate_body(q.body, r, q.did);
        // A body mutated after it was chunked is no chunked body any more.
        for (const auto& field : q.fields)
          if (field.first == "Transfer-Encoding") q.broken = q.half_close = true;
        break;
    }
  }
  std::string w = wire(q);
  if (garbled) w = garble(std::move(w), r, q);
  out = q;
  return w;
}

/// What is wrong with the answer to `q`; "" when nothing. Session routes may answer 503 (the
/// generation service failed) and 500 for a chat template's failure (docs/sessions.md), nothing
/// else 5xx; JSON and event-stream bodies must parse.
inline std::string answer_problem(const request& q, const raw_reply& a) {
  if (!a.problem.empty()) return a.problem;
  if (!a.complete) {
    // A broken request may be closed on, after a 100 Continue too.
    const bool nothing =
        a.bytes.empty() || (a.status == 100 && a.bytes.size() == a.head.size() + 2);
    if (nothing && a.closed) return q.broken ? "" : "closed without an answer";
    return a.bytes.empty() ? "no answer in time" : "an incomplete answer";
  }
  const int s = a.status;
  const bool template_failed = s == 500 && a.body.find("template") != std::string::npos;
  if (!(s >= 200 && s < 300) && !(s >= 400 && s < 500) && s != 503 && !template_failed)
    return "status " + std::to_string(s);
  const std::string type = header_value(a.head, "content-type");
  if (q.method == "HEAD") return "";
  if (type.rfind("application/json", 0) == 0 && !nlohmann::json::accept(a.body))
    return "a body that is not JSON";
  if (type.rfind("text/event-stream", 0) == 0) {
    std::istringstream in(a.body);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("data: ", 0) == 0 && line != "data: [DONE]" &&
          !nlohmann::json::accept(line.substr(6)))
        return "an event that is not JSON: " + printable(line, 100);
  }
  return "";
}

}  // namespace milesrt::testing
