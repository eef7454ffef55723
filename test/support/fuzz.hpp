#pragma once
// What the fuzz tests share (test/fuzz.test.cpp, test/http_fuzz.test.cpp): the seed and the time
// budget from the environment, seeded picks and text mutations, and running the milesrt
// executable in a child under a memory and a time limit, its outcome checked for the ways a run
// must never end (a signal, a hang, a stack trace, a wall of stderr).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support.hpp"

namespace milesrt::testing {

/// The seed (MILESRT_FUZZ_SEED overrides it, to explore beyond the cases CI runs).
inline uint64_t fuzz_seed() {
  const char* s = std::getenv("MILESRT_FUZZ_SEED");
  return s == nullptr ? 20261205 : std::stoull(s);
}

/// The time a fuzz test may spend on cases (a case in progress finishes): MILESRT_FUZZ_SECONDS,
/// else `seconds`.
inline std::chrono::seconds fuzz_budget(long seconds) {
  const char* s = std::getenv("MILESRT_FUZZ_SECONDS");
  return std::chrono::seconds(s == nullptr ? seconds : std::stol(s));
}

using fuzz_rng = std::mt19937_64;

/// A uniform index below `n` (0 when n is 0).
inline size_t pick(fuzz_rng& r, size_t n) {
  return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(r);
}

/// Numbers at and past the edges of the types a reader may put them in.
inline const std::vector<std::string>& huge_numbers() {
  static const std::vector<std::string> v = {"0",
                                             "-1",
                                             "4294967296",
                                             "99999999999999999999999",
                                             "1e308",
                                             "-1e308",
                                             "nan",
                                             "inf",
                                             "9223372036854775807",
                                             "-9223372036854775808",
                                             "0.000000000000000000001",
                                             "2147483648"};
  return v;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline std::string join_lines(const std::vector<std::string>& ls) {
  std::string out;
  for (const auto& l : ls) out += l + "\n";
  return out;
}

/// One mutation of `text`, by kind: a byte, a line deleted, duplicated or swapped, a number made
/// huge, a long name, deep nesting, a cut, one of `tokens` inserted, a chunk repeated.
inline std::string mutate_text(std::string text, fuzz_rng& r,
                               const std::vector<std::string>& tokens) {
  auto ls = split_lines(text);
  switch (pick(r, 10)) {
    case 0:  // a byte
      if (!text.empty()) text[pick(r, text.size())] = static_cast<char>(pick(r, 256));
      return text;
    case 1:  // delete a line
      if (!ls.empty()) ls.erase(ls.begin() + pick(r, ls.size()));
      return join_lines(ls);
    case 2:  // duplicate a line
      if (!ls.empty()) {
        auto i = pick(r, ls.size());
        ls.insert(ls.begin() + i, ls[i]);
      }
      return join_lines(ls);
    case 3: {  // a number becomes a huge (or odd) one
      std::vector<std::pair<size_t, size_t>> numbers;
      static const std::regex number(R"([-+]?\b[0-9][0-9.eE+-]*)");
      for (auto it = std::sregex_iterator(text.begin(), text.end(), number);
           it != std::sregex_iterator(); ++it)
        numbers.emplace_back(it->position(), it->length());
      if (numbers.empty()) return text;
      auto [at, len] = numbers[pick(r, numbers.size())];
      return text.replace(at, len, huge_numbers()[pick(r, huge_numbers().size())]);
    }
    case 4: {  // a long name in a string or identifier
      static const std::regex word(R"([A-Za-z_][A-Za-z0-9_]*)");
      std::vector<std::pair<size_t, size_t>> words;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), word);
           it != std::sregex_iterator(); ++it)
        words.emplace_back(it->position(), it->length());
      if (words.empty()) return text;
      auto [at, len] = words[pick(r, words.size())];
      return text.replace(at, len, std::string(1000 + pick(r, 100000), 'x'));
    }
    case 5: {  // deep nesting
      const size_t depth = 100 + pick(r, 20000);
      const bool list = pick(r, 2) == 0;
      std::string nest =
          std::string(depth, list ? '[' : '(') + "1" + std::string(depth, list ? ']' : ')');
      return text.insert(pick(r, text.size() + 1), nest);
    }
    case 6:  // truncated
      return text.substr(0, pick(r, text.size() + 1));
    case 7:  // a token inserted
      return text.insert(pick(r, text.size() + 1), tokens[pick(r, tokens.size())]);
    case 8:  // two lines swapped
      if (ls.size() > 1) std::swap(ls[pick(r, ls.size())], ls[pick(r, ls.size())]);
      return join_lines(ls);
    default: {  // a chunk repeated
      if (text.empty()) return text;
      auto at = pick(r, text.size());
      auto chunk = text.substr(at, 1 + pick(r, 200));
      std::string rep;
      for (size_t i = 0, n = 1 + pick(r, 200); i < n; ++i) rep += chunk;
      return text.insert(at, rep);
    }
  }
}

/// One to three mutations of `text`.
inline std::string mutate(const std::string& text, fuzz_rng& r,
                          const std::vector<std::string>& tokens) {
  std::string out = text;
  for (size_t i = 0, n = 1 + pick(r, 3); i < n; ++i) out = mutate_text(out, r, tokens);
  return out;
}

/// How a limited run of the executable ended.
struct outcome {
  int status = -1;  ///< exit status; -1 when signalled or killed
  int signal = 0;
  bool timed_out = false;
  std::string err;
};

/// The limits of one run.
struct run_limits {
  std::chrono::seconds time{20};
  rlim_t memory = rlim_t(4) << 30;  ///< RLIMIT_AS
};

/// Runs milesrt `args` in `cwd` with stdin from `input` ("" for /dev/null) and stdout to
/// /dev/null, under `limits`; stderr is kept in scratch_dir/stderr.
inline outcome run_limited(const std::vector<std::string>& args, const fs::path& cwd,
                           const fs::path& input, const fs::path& scratch_dir,
                           run_limits limits = {}) {
  const auto err_path = scratch_dir / "stderr";
  pid_t pid = ::fork();
  if (pid == 0) {
    rlimit mem{limits.memory, limits.memory};
    ::setrlimit(RLIMIT_AS, &mem);
    rlimit core{0, 0};
    ::setrlimit(RLIMIT_CORE, &core);
    if (::chdir(cwd.c_str()) != 0) ::_exit(120);
    int in = ::open(input.empty() ? "/dev/null" : input.c_str(), O_RDONLY);
    int out = ::open("/dev/null", O_WRONLY);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(121);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> argv;
    std::string program = exe();
    argv.push_back(program.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(122);
  }
  outcome o;
  const auto until = std::chrono::steady_clock::now() + limits.time;
  int raw = 0;
  while (::waitpid(pid, &raw, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &raw, 0);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!o.timed_out && WIFEXITED(raw)) o.status = WEXITSTATUS(raw);
  if (!o.timed_out && WIFSIGNALED(raw)) o.signal = WTERMSIG(raw);
  o.err = slurp(err_path);
  return o;
}

/// Whether `err` shows a crash: a stack trace, an uncaught exception (CAF prints one an actor
/// let through as "*** unhandled exception"), a sanitizer's report.
inline bool shows_crash(const std::string& err) {
  static const std::regex trace(
      R"((^|\n)\s*#\d+\s+0x|terminate called|frame #\d|most recent call first|\n\s+at \S+:\d+|)"
      R"(Segmentation fault|Aborted|AddressSanitizer|unhandled exception)");
  return std::regex_search(err, trace);
}

/// What is wrong with an outcome that may end with an exit status up to `max_status`, with at
/// most `max_lines` lines on stderr; "" when it is fine.
inline std::string problem_of(const outcome& o, const run_limits& limits, int max_status = 2,
                              size_t max_lines = 6) {
  if (o.timed_out) return "no end within " + std::to_string(limits.time.count()) + " s";
  if (o.signal != 0) return "killed by signal " + std::to_string(o.signal);
  if (o.status < 0 || o.status > max_status) return "exit status " + std::to_string(o.status);
  if (shows_crash(o.err)) return "a stack trace or crash on stderr";
  if (lines(o.err) > max_lines) return std::to_string(lines(o.err)) + " lines on stderr";
  return "";
}

}  // namespace milesrt::testing
