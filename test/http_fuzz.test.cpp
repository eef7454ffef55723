// Fuzz of the HTTP surfaces, end to end, seeded and bounded in time (test/support/fuzz.hpp:
// MILESRT_FUZZ_SEED, MILESRT_FUZZ_SECONDS):
// - the session server and the live page of one `milesrt run graphs/agent_sessions.capnp
//   --metrics-port 0` get mutated requests over raw sockets (paths, methods, header fields,
//   framing, bodies); every answer must be well-formed HTTP with a 2xx or 4xx status (5xx only
//   where docs/sessions.md has one) and a JSON body that parses, garbage may only be closed on,
//   and both servers must keep answering; then valid sessions drive the run to exit status 0;
// - `milesrt run` on a graph with a remote environment and on one with a remote reward, against a
//   fake server in this process that answers with seeded mutations of valid answers (bytes that
//   are no UTF-8, cut or 100,000-deep JSON, huge numbers, wrong types, an empty body, a 500 whose
//   body is cut inside a character, answers past the timeout, a connection closed mid-body); each
//   run must end with 0, or with 1 and a few lines naming the URL and the cause, never a signal,
//   a stack trace or a hang, and leave JSON files that parse.
// A failing case is kept under build/test/fuzz-failures/ (its request, or its stderr).
#include <iostream>
#include <nlohmann/json.hpp>

#include "test/support/arith_setup.hpp"
#include "test/support/fake_http_server.hpp"
#include "test/support/fuzz.hpp"
#include "test/support/http_mutations.hpp"
#include "test/support/raw_http.hpp"

namespace {
using namespace milesrt::testing;
using json = nlohmann::json;
using std::chrono::milliseconds;

/// A folder under build/test/fuzz-failures/ for a failing case.
fs::path kept_dir(const std::string& name) {
  const fs::path d = fs::path(MILESRT_BINARY_DIR) / "test" / "fuzz-failures" / name;
  fs::create_directories(d);
  return d;
}

/// The calculator-agent setup (a model with a chat template, tasks), made once per process.
const fs::path& calc_setup() {
  static fs::path dir = [] {
    fs::path d = scratch("http-fuzz-calc");
    const std::string cmd = std::string("'") + MILESRT_AGENT_CALC_MAKE + "' --out '" + d.string() +
                            "' --min-operand 10 --max-operand 20 --sft-size 8 --rl-size 16 "
                            "--heldout 2 --hidden 32 --heads 2 > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return d;
  }();
  return dir;
}

// ---- the session server and the live page -------------------------------------------------

/// The ports of one run's two servers.
struct servers {
  uint16_t sessions = 0, page = 0;
};

/// A valid request on a connection of its own; its answer (20 s at most).
raw_reply call(uint16_t port, const std::string& method, const std::string& target,
               const std::string& body = "") {
  return raw_exchange(port, wire(base_request(method, target, port, body)), false, method == "HEAD",
                      milliseconds(20000));
}

/// The servers of run `b` once both listen: RUN/server.json and "live page at URL" on stdout.
servers wait_for_servers(const background& b, const fs::path& run) {
  static const std::regex page(R"(live page at http://127\.0\.0\.1:([0-9]+)/)");
  servers s;
  for (int i = 0; i < 900 && !b.ended() && (s.sessions == 0 || s.page == 0); ++i) {
    std::smatch m;
    const std::string out = slurp(b.dir / "out");
    if (std::regex_search(out, m, page)) s.page = static_cast<uint16_t>(std::stoi(m[1]));
    if (fs::exists(run / "server.json"))
      s.sessions = json::parse(slurp(run / "server.json"))["port"].get<uint16_t>();
    std::this_thread::sleep_for(milliseconds(100));
  }
  return s;
}

/// Opens a session in `group`; its id, or "" (the answer printed).
std::string open_session(uint16_t port, const std::string& group) {
  auto a = call(port, "POST", "/sessions", json{{"group", group}}.dump());
  if (a.status == 200) return json::parse(a.body).value("id", "");
  std::cout << "POST /sessions: " << printable(a.bytes) << "\n";
  return "";
}

/// One chat turn of session `id`, asked again while the schedule admits no group (429); the
/// final status.
int chat_turn(uint16_t port, const std::string& id) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "what is 12+13"}], "max_tokens": 4})";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    auto a = call(port, "POST", "/sessions/" + id + "/v1/chat/completions", body);
    if (a.status != 429 || std::chrono::steady_clock::now() > until) {
      if (a.status != 200) std::cout << "chat: " << printable(a.bytes) << "\n";
      return a.status;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

/// A valid request to the session server: open (in the keeper's group, or another), chat
/// (streamed or not), generate, end, read, delete, the models, health. `ids`: the sessions the
/// fuzz opened; `endable`: those outside the keeper's group, the only ones it ends or deletes
/// (ending one of the keeper's group would send the group out, and the steps would run during
/// the fuzz).
request session_template(fuzz_rng& r, const std::vector<std::string>& ids,
                         const std::vector<std::string>& endable, uint16_t port) {
  const size_t route = pick(r, 10);
  const auto& from = route == 5 || route == 7 ? endable : ids;
  std::string id(32, '0');
  for (auto& c : id) c = "0123456789abcdef"[pick(r, 16)];
  if (!from.empty() && pick(r, 8) != 0) id = from[pick(r, from.size())];
  const std::string s = "/sessions/" + id;
  const std::string chat =
      R"({"messages": [{"role": "user", "content": "what is 12+13"}], "max_tokens": 4)";
  switch (route) {
    case 0:
    case 1:
      return base_request(
          "POST", "/sessions", port,
          json{{"group", pick(r, 8) == 0 ? "keeper" : "other" + std::to_string(pick(r, 9))},
               {"metadata", {{"label", "25"}}}}
              .dump());
    case 2:
      return base_request("POST", s + "/v1/chat/completions", port, chat + "}");
    case 3:
      return base_request("POST", s + "/v1/chat/completions", port,
                          chat + R"(, "stream": true, "stream_options": {"include_usage": true}})");
    case 4:
      return base_request("POST", s + "/generate", port,
                          R"({"input_ids": [5, 6, 7], "max_tokens": 3, "stop": ["1"]})");
    case 5:
      return base_request("POST", s + "/end", port, R"({"reward": 0.5})");
    case 6:
      return base_request("GET", s + "?tokens=1", port);
    case 7:
      return base_request("DELETE", s, port);
    case 8:
      return base_request("GET", s + "/v1/models", port);
    default:
      return base_request("GET", "/health", port);
  }
}

/// A valid request to the live page's server.
request page_template(fuzz_rng& r, uint16_t port) {
  static const std::vector<std::string> targets = {"/", "/api/live", "/api/steps?since=0",
                                                   "/metrics"};
  return base_request(pick(r, 6) == 0 ? "HEAD" : "GET", targets[pick(r, targets.size())], port);
}

/// "" when both servers answer: GET /health 200 with status ok, GET /metrics 200.
std::string liveness_problem(const servers& s) {
  auto h = call(s.sessions, "GET", "/health");
  if (h.status != 200 || h.body.find("\"status\":\"ok\"") == std::string::npos)
    return "GET /health answered '" + printable(h.bytes) + "'" + (h.closed ? " (closed)" : "");
  auto m = call(s.page, "GET", "/metrics");
  if (m.status != 200) return "GET /metrics answered '" + printable(m.bytes) + "'";
  return "";
}

/// Sends mutated requests to both servers for the time budget, each answer judged, both servers'
/// health checked every 20 cases; the ids of the sessions the cases opened.
std::vector<std::string> fuzz_servers(const servers& s, fuzz_rng& r) {
  std::vector<std::string> ids, endable, recent;
  const auto until = std::chrono::steady_clock::now() + fuzz_budget(25);
  int done = 0, failures = 0, to_page = 0;
  for (; std::chrono::steady_clock::now() < until && failures < 10; ++done) {
    const bool page = pick(r, 5) == 0;
    to_page += page;
    const uint16_t port = page ? s.page : s.sessions;
    request q;
    const std::string bytes =
        mutated_wire(page ? page_template(r, port) : session_template(r, ids, endable, port), r, q);
    const auto a = raw_exchange(port, bytes, q.half_close, q.method == "HEAD", milliseconds(15000));
    std::string what = "case " + std::to_string(done) + (page ? " (live page): " : ": ");
    for (const auto& d : q.did) what += d + "; ";
    recent.push_back(what + "answered " + std::to_string(a.status));
    if (recent.size() > 20) recent.erase(recent.begin());
    if (const auto problem = answer_problem(q, a); !problem.empty()) {
      ++failures;
      const auto kept =
          kept_dir("http-" + std::to_string(fuzz_seed()) + "-" + std::to_string(done));
      std::ofstream(kept / "request", std::ios::binary) << bytes;
      std::ofstream(kept / "answer", std::ios::binary) << a.bytes;
      ADD_FAILURE() << what << problem << " (seed " << fuzz_seed() << ", kept in " << kept.string()
                    << ")\n  request: " << printable(bytes) << "\n  answer: " << printable(a.bytes);
    }
    // Any answer of an open (whatever path led there) names a session to clean up at the end.
    if (a.status == 200 && !page)
      if (auto j = json::parse(a.body, nullptr, false); j.is_object() && j.contains("base_url")) {
        ids.push_back(j["id"].get<std::string>());
        if (j.value("group", "") != "keeper") endable.push_back(ids.back());
      }
    if (done % 20 == 19) {
      if (const auto problem = liveness_problem(s); !problem.empty()) {
        std::string last;
        for (const auto& c : recent) last += "\n  " + c;
        ADD_FAILURE() << "after case " << done << ": " << problem << " (seed " << fuzz_seed()
                      << "); the last cases:" << last;
        break;
      }
    }
  }
  std::cout << "http requests: " << done << " (" << to_page << " to the live page), " << ids.size()
            << " sessions opened (seed " << fuzz_seed() << ")\n";
  return ids;
}

/// Ends the run: the fuzz's sessions deleted, the keeper's group ended (a step), then one valid
/// group per remaining step (open, a chat turn, end with a reward).
void drive_to_the_end(const servers& s, const std::string& keeper,
                      const std::vector<std::string>& ids, int steps) {
  for (const auto& id : ids) {
    // A session with a turn in flight is refused (409) until the turn ends.
    for (int i = 0; i < 50 && call(s.sessions, "DELETE", "/sessions/" + id).status == 409; ++i) {
      auto state = json::parse(call(s.sessions, "GET", "/sessions/" + id).body, nullptr, false);
      if (!state.is_object() || state.value("state", "") != "open") break;
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  auto end = call(s.sessions, "POST", "/sessions/" + keeper + "/end", R"({"reward": 1.0})");
  ASSERT_EQ(end.status, 200) << printable(end.bytes);
  for (int step = 2; step <= steps; ++step) {
    const auto id = open_session(s.sessions, "final" + std::to_string(step));
    ASSERT_FALSE(id.empty());
    ASSERT_EQ(chat_turn(s.sessions, id), 200);
    end = call(s.sessions, "POST", "/sessions/" + id + "/end", json{{"reward", step % 2}}.dump());
    ASSERT_EQ(end.status, 200) << printable(end.bytes);
  }
}

// One run serves both: its session server (a keeper session holds the one group the schedule
// admits, so the fuzz's sessions in other groups never start a step; the fuzz's sessions in the
// keeper's group have turns sampled) and its live page.
TEST(HttpFuzz, SessionServerAndLivePageAnswerMutatedRequests) {
  const std::string model = (calc_setup() / "model").string();
  const fs::path run = scratch("http-fuzz-sessions") / "run";
  constexpr int kSteps = 3;
  auto b =
      start("run graphs/agent_sessions.capnp --quiet --metrics-port 0 --run-dir '" + run.string() +
                "' --set server.model=" + model + " --set rollout.model=" + model +
                " --set trainer.model=" + model + " --set run.steps=" + std::to_string(kSteps) +
                " --set run.batchSize=1 --set rollout.kvBlocks=256"
                " --set server.maxNewTokens=8 --set rollout.maxNewTokens=8"
                // The fuzz may open sessions in the keeper's group whose ids it never read:
                // once the keeper ends, the group waits 2 s for them, then goes out without.
                " --set server.groupTimeoutSeconds=2",
            "http-fuzz-sessions-run");
  const servers s = wait_for_servers(b, run);
  ASSERT_TRUE(s.sessions != 0 && s.page != 0) << b.wait(std::chrono::seconds(5)).err;
  const std::string keeper = open_session(s.sessions, "keeper");
  ASSERT_FALSE(keeper.empty());
  ASSERT_EQ(chat_turn(s.sessions, keeper), 200);
  fuzz_rng r(fuzz_seed() + 10);
  const auto ids = fuzz_servers(s, r);
  drive_to_the_end(s, keeper, ids, kSteps);
  const auto done = b.wait(std::chrono::seconds(120));
  ASSERT_EQ(done.status, 0) << done.err;
  EXPECT_EQ(json::parse(slurp(run / "summary.json"))["steps"], kSteps);
}

// ---- a remote environment and a remote reward ----------------------------------------------

/// The ways the fake remote answers: well, or badly one way.
enum class bad : size_t {
  none,
  utf8,        ///< a string with bytes that are no UTF-8
  truncated,   ///< the JSON cut short
  deep,        ///< 100,000-deep JSON, as the body or one value
  huge,        ///< a number past every type (1e400, 2^64-1, 1e39 for a float)
  wrong_type,  ///< a field of another type
  empty,       ///< 200 with an empty body
  cut_500,     ///< a 5xx whose multi-byte body has a character at byte 200
  slow,        ///< the answer after the client's timeout
  cut_body,    ///< a Content-Length past the bytes sent, then the connection closed
  not_http,    ///< bytes that are no HTTP
  not_found,   ///< 404
  count
};

struct bad_kind {
  const char* name;
  std::vector<std::string> causes;  ///< words (lower case) of which a run's error shows one
};

const bad_kind& kind_of(bad b) {
  static const std::vector<bad_kind> kinds = {
      {"valid answers", {}},
      {"bytes that are no UTF-8", {"utf-8", "not a json", "not json"}},
      {"truncated JSON", {"not a json", "not json"}},
      {"100,000-deep JSON", {"nested deeper", "not a json", "not json", "not a number", "must"}},
      {"huge numbers", {"finite", "count", "not a number", "overflow", "must", "not a json"}},
      {"wrong types", {"must", "rewards", "not a json"}},
      {"an empty body", {"not a json", "not json"}},
      {"a 5xx cut inside a character", {"http 500", "http 502", "http 503"}},
      {"answers past the timeout", {"timed out"}},
      {"a body cut short", {"cannot read the answer"}},
      {"bytes that are no HTTP", {"cannot read the answer"}},
      {"404", {"http 404"}}};
  return kinds[static_cast<size_t>(b)];
}

/// `valid` answered badly the way `how` says.
fake_answer bad_answer(bad how, nlohmann::json valid, fuzz_rng& r, milliseconds timeout) {
  // A value to replace: the first message's content (environment) or a reward.
  auto slot = [&]() -> nlohmann::json& {
    if (valid.contains("rewards")) return valid["rewards"][pick(r, valid["rewards"].size())];
    if (pick(r, 3) == 0) return valid[pick(r, 2) ? "tools" : "x"];
    return valid["messages"][0]["content"];
  };
  auto keys = [&] {
    std::vector<std::string> k;
    for (auto& [key, v] : valid.items()) k.push_back(key);
    return k;
  };
  switch (how) {
    case bad::utf8:
      slot() = "@RAW@";
      return fake_answer::http(200,
                               with_raw(valid, "\"a" + kBadUtf8[pick(r, kBadUtf8.size())] + "\""));
    case bad::truncated: {
      const auto s = valid.dump();
      return fake_answer::http(200, s.substr(0, pick(r, s.size())));
    }
    case bad::deep: {
      const std::string nest = std::string(100000, '[') + std::string(100000, ']');
      if (pick(r, 4) == 0) return fake_answer::http(200, nest);
      slot() = "@RAW@";
      return fake_answer::http(200, with_raw(valid, nest));
    }
    case bad::huge: {
      static const std::vector<std::string> numbers = {"1e400", "-1e400", "18446744073709551615",
                                                       "1e39",  "-1e39",  "4294967296"};
      auto k = keys();
      const auto key = k[pick(r, k.size())];
      (key == "messages" || key == "rewards" ? slot() : valid[key]) = "@RAW@";
      return fake_answer::http(200, with_raw(valid, numbers[pick(r, numbers.size())]));
    }
    case bad::wrong_type: {
      static const std::vector<std::string> values = {"\"x\"", "null", "[]", "{}", "true", "-1"};
      if (pick(r, 5) == 0) return fake_answer::http(200, pick(r, 2) ? "[]" : "\"x\"");
      auto k = keys();
      valid[k[pick(r, k.size())]] = "@RAW@";
      return fake_answer::http(200, with_raw(valid, values[pick(r, values.size())]));
    }
    case bad::empty:
      return fake_answer::http(200, "");
    case bad::cut_500: {
      std::string body = "x";  // then 3-byte characters: byte 200 is inside one
      for (int i = 0; i < 300; ++i) body += "\xe2\x82\xac";
      return fake_answer::http(std::vector<int>{500, 502, 503}[pick(r, 3)], body, "text/plain");
    }
    case bad::slow: {
      auto a = fake_answer::http(200, valid.dump());
      a.delay = timeout + milliseconds(300);
      return a;
    }
    case bad::cut_body: {
      const auto s = valid.dump();
      return {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(s.size() + 100) + "\r\n\r\n" + s.substr(0, pick(r, s.size())),
              milliseconds(0)};
    }
    case bad::not_http:
      return {pick(r, 2) ? "SSH-2.0-OpenSSH_9.2\r\n" : "HTTP/9 OK\r\n\r\n{}", milliseconds(0)};
    case bad::not_found:
      return fake_answer::http(404, "no such page", "text/plain");
    default:
      return fake_answer::http(200, valid.dump());
  }
}

/// The valid answers of the remote environment's protocol (docs/environments.md).
nlohmann::json valid_env_answer(const fake_request& q) {
  const nlohmann::json user = {{"role", "user"}, {"content", "what is 12+13"}};
  if (q.target.size() >= 6 && q.target.substr(q.target.size() - 6) == "/reset")
    return {{"messages", {user}}};
  return {
      {"messages", {user}}, {"reward", 1.0}, {"done", true}, {"tool_calls", 0}, {"tool_errors", 0}};
}

/// The valid answer of a reward server: a reward for each sample.
nlohmann::json valid_reward_answer(const fake_request& q) {
  const auto j = nlohmann::json::parse(q.body, nullptr, false);
  const size_t n = j.is_object() && j.contains("samples") ? j["samples"].size() : 1;
  std::vector<double> rewards;
  for (size_t i = 0; i < n; ++i) rewards.push_back(i % 2 ? 1.0 : 0.0);
  return {{"rewards", rewards}};
}

/// What is wrong with the files a run left: a .json that does not parse, a metrics line.
std::string files_problem(const fs::path& run) {
  if (!fs::exists(run)) return "";
  for (const auto& e : fs::directory_iterator(run)) {
    const auto name = e.path().filename().string();
    if (e.path().extension() == ".json" && !json::accept(slurp(e.path())))
      return name + " is not JSON";
    if (name == "metrics.jsonl") {
      std::istringstream in(slurp(e.path()));
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && !json::accept(line)) return "a line of metrics.jsonl is not JSON";
    }
  }
  return "";
}

/// What a fuzz of a remote needs: the valid answers, the run's arguments given the server's URL
/// and the run folder, the client's timeout.
struct remote_fuzz {
  std::string name;
  std::function<nlohmann::json(const fake_request&)> valid;
  std::function<std::vector<std::string>(const std::string& url, const fs::path& run)> args;
  milliseconds timeout;
};

/// Checks one run; on failure its stderr is kept under fuzz-failures/.
void check_remote_run(const std::string& name, const outcome& o, const run_limits& limits,
                      const std::vector<bad>& sent, const std::string& url, const fs::path& run) {
  std::string causes, what;
  bool named = false;
  std::string err = o.err;
  for (auto& c : err) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (bad b : sent) {
    what += std::string(what.empty() ? "" : ", ") + kind_of(b).name;
    for (const auto& c : kind_of(b).causes) {
      causes += " '" + c + "'";
      named = named || err.find(c) != std::string::npos;
    }
  }
  // At most 4 lines of its own, and one warning for each restart after a transient failure
  // (an unreachable or failing server: the driver restarts the actor up to maxStartupFailures
  // times, 3 by default, before the run ends; docs/errors.md).
  std::string problem = problem_of(o, limits, 1, 4 + 4);
  if (problem.empty() && sent.empty() && o.status != 0)
    problem = "valid answers, and the run failed";
  if (problem.empty() && o.status == 1 && (err.find(url) == std::string::npos || !named))
    problem = "its error names not " + url + " and one of" + causes;
  if (problem.empty()) problem = files_problem(run);
  if (problem.empty()) return;
  const auto kept = kept_dir(name);
  std::ofstream(kept / "stderr", std::ios::binary) << o.err;
  ADD_FAILURE() << name << " (answers: " << (what.empty() ? "valid" : what) << "): " << problem
                << " (seed " << fuzz_seed() << ", exit status " << o.status << ", signal "
                << o.signal << "; stderr kept in " << kept.string() << ")\n"
                << printable(o.err, 2000);
}

/// Runs the graph against the fake remote again and again for the time budget: the first run with
/// valid answers, then each with a seeded mix: valid answers first, then bad ones.
void fuzz_remote(const remote_fuzz& f, uint64_t seed_offset) {
  fuzz_rng r(fuzz_seed() + seed_offset);
  const auto until = std::chrono::steady_clock::now() + fuzz_budget(25);
  const run_limits limits{std::chrono::seconds(40)};
  int runs = 0;
  for (; runs == 0 || std::chrono::steady_clock::now() < until; ++runs) {
    const size_t valid_first = pick(r, 4);
    std::vector<bad> plan;  // the answer of each request past valid_first (the last repeats)
    for (size_t i = 0, n = runs == 0 ? 0 : 1 + pick(r, 3); i < n; ++i)
      plan.push_back(static_cast<bad>(1 + pick(r, static_cast<size_t>(bad::count) - 1)));
    const uint64_t answer_seed = r();
    std::mutex mu;
    std::vector<bad> sent;
    std::atomic<size_t> next{0};
    fake_http_server server([&](const fake_request& q) {
      const size_t i = next++;
      const auto valid = f.valid(q);
      if (plan.empty() || i < valid_first) return fake_answer::http(200, valid.dump());
      const bad how = plan[std::min(i - valid_first, plan.size() - 1)];
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(how);
      }
      fuzz_rng ar(answer_seed + i);
      return bad_answer(how, valid, ar, f.timeout);
    });
    const fs::path run = scratch("http-fuzz-" + f.name) / ("run" + std::to_string(runs));
    const auto o = run_limited(f.args(server.url(), run), source_dir(), "",
                               scratch("http-fuzz-" + f.name + "-err"), limits);
    if (runs == 0) {
      EXPECT_GT(server.requests(), 0u) << f.name << ": the remote was not asked";
    }
    std::lock_guard<std::mutex> lock(mu);
    const int failed = ::testing::Test::HasFailure();
    check_remote_run(f.name + "-" + std::to_string(fuzz_seed()) + "-" + std::to_string(runs), o,
                     limits, sent, server.url(), run);
    if (runs == 0 && ::testing::Test::HasFailure() && !failed) return;  // the setup is wrong
  }
  std::cout << f.name << ": " << runs << " runs (seed " << fuzz_seed() << ")\n";
}

TEST(HttpFuzz, RemoteEnvironmentAnswersAreSurvivedOrNamed) {
  const std::string s = calc_setup().string();
  fuzz_remote({"remote-env", valid_env_answer,
               [s](const std::string& url, const fs::path& run) {
                 const std::string options =
                     "{\"url\": \"" + url + "/env\", \"timeoutSeconds\": 1}";
                 return std::vector<std::string>{"run",
                                                 "graphs/agent_env.capnp",
                                                 "--quiet",
                                                 "--run-dir",
                                                 run.string(),
                                                 "--set",
                                                 "run.steps=1",
                                                 "--set",
                                                 "run.batchSize=1",
                                                 "--set",
                                                 "env.samplesPerPrompt=2",
                                                 "--set",
                                                 "env.maxTurns=2",
                                                 "--set",
                                                 "env.evalInterval=0",
                                                 "--set",
                                                 "filter.dynamicSampling=false",
                                                 "--set",
                                                 "env.environment=remote",
                                                 "--set",
                                                 "env.options=" + options,
                                                 "--set",
                                                 "env.evalOptions=" + options,
                                                 "--set",
                                                 "env.evalData=" + s + "/heldout.jsonl",
                                                 "--set",
                                                 "trainer.model=" + s + "/model",
                                                 "--set",
                                                 "rollout.model=" + s + "/model",
                                                 "--set",
                                                 "env.model=" + s + "/model",
                                                 "--set",
                                                 "data.path=" + s + "/rl.jsonl",
                                                 "--set",
                                                 "trainer.exportDir=" + (run / "export").string()};
               },
               milliseconds(1000)},
              20);
}

TEST(HttpFuzz, RemoteRewardAnswersAreSurvivedOrNamed) {
  const fs::path setup = shared_arith_setup("http-fuzz-arith");
  const fs::path graphs = scratch("http-fuzz-reward-graphs");
  fuzz_remote({"remote-reward", valid_reward_answer,
               [setup, graphs](const std::string& url, const fs::path& run) {
                 std::string text = slurp(fs::path(source_dir()) / "graphs" / "grpo_sync.capnp");
                 const std::string math = "(name = \"reward\", kind = \"math_reward\")";
                 text.replace(
                     text.find(math), math.size(),
                     "(name = \"reward\", kind = \"remote_reward\", params = (remoteReward "
                     "= (url = \"" +
                         url +
                         "/score\", timeoutSeconds = 0.5, retries = 2, "
                         "backoffSeconds = 0.05)))");
                 const auto graph = graphs / (run.filename().string() + ".capnp");
                 std::ofstream(graph) << text;
                 const std::string s = setup.string();
                 return std::vector<std::string>{"run",
                                                 graph.string(),
                                                 "--quiet",
                                                 "--run-dir",
                                                 run.string(),
                                                 "--set",
                                                 "run.steps=2",
                                                 "--set",
                                                 "run.batchSize=1",
                                                 "--set",
                                                 "rollout.samplesPerPrompt=2",
                                                 "--set",
                                                 "filter.dynamicSampling=false",
                                                 "--set",
                                                 "trainer.evalInterval=0",
                                                 "--set",
                                                 "trainer.evalData=" + s + "/heldout.jsonl",
                                                 "--set",
                                                 "trainer.model=" + s + "/model",
                                                 "--set",
                                                 "rollout.model=" + s + "/model",
                                                 "--set",
                                                 "data.path=" + s + "/rl.jsonl",
                                                 "--set",
                                                 "trainer.exportDir=" + (run / "export").string()};
               },
               milliseconds(500)},
              30);
}

}  // namespace
