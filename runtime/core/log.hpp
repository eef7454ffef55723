#pragma once
/// milesrt's one logger: leveled lines on stderr, as text or as one JSON object a line, each naming
/// the actor and the step it concerns where there is one. Every subcommand takes `--log-level` and
/// `--log-format` (runtime/cli/command.cpp). What a command prints for its user (its results, the
/// progress bar, the error line that ends it) is not logging and stays on its streams.
///
///   log::info("worker '{}' joined again", name);                 // no actor, no step
///   log::warn(log::at{"learner", 12}, "gradient norm {}", norm);  // names the actor and step
///
/// The lines are written through spdlog (one logger, thread-safe) in log.cpp. A message's `{}`
/// are replaced by the arguments in order, each written as `operator<<` writes it; this header
/// includes no formatting library, so that any translation unit (whatever fmt its other headers
/// bring) may log.

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace milesrt::log {

enum class level : int { trace = 0, debug, info, warn, error, off };

/// What a line concerns: the actor and the step (the learner's step counter), each optional.
struct at {
  std::string actor;
  std::optional<uint64_t> step;
};

/// Sets the process's level ("trace", "debug", "info", "warn", "error", "off") and format
/// ("text" or "json"); throws std::invalid_argument naming the accepted words.
void configure(std::string_view level_name, std::string_view format_name);
/// The configured words, to hand a child process the same settings.
std::string level_name();
std::string format_name();
/// The level lines must reach to be written (info unless configured).
level threshold();
inline bool enabled(level l) { return l >= threshold() && l != level::off; }

/// Writes one line at `l` about `where`.
void write(level l, const at& where, std::string_view message);

namespace detail {

inline void substitute(std::string& out, std::string_view f) { out.append(f); }

template <class T, class... R>
void substitute(std::string& out, std::string_view f, const T& value, const R&... rest) {
  const size_t at = f.find("{}");
  if (at == std::string_view::npos) {
    out.append(f);
    return;
  }
  out.append(f.substr(0, at));
  std::ostringstream text;
  text << value;
  out += text.str();
  substitute(out, f.substr(at + 2), rest...);
}

}  // namespace detail

/// `f` with each `{}` replaced by the next argument.
template <class... A>
std::string format(std::string_view f, const A&... args) {
  std::string out;
  detail::substitute(out, f, args...);
  return out;
}

#define MILESRT_LOG_LEVEL_FN(name)                                           \
  template <class... A>                                                      \
  void name(std::string_view f, const A&... args) {                          \
    if (enabled(level::name)) write(level::name, at{}, format(f, args...));  \
  }                                                                          \
  template <class... A>                                                      \
  void name(const at& where, std::string_view f, const A&... args) {         \
    if (enabled(level::name)) write(level::name, where, format(f, args...)); \
  }
MILESRT_LOG_LEVEL_FN(trace)
MILESRT_LOG_LEVEL_FN(debug)
MILESRT_LOG_LEVEL_FN(info)
MILESRT_LOG_LEVEL_FN(warn)
MILESRT_LOG_LEVEL_FN(error)
#undef MILESRT_LOG_LEVEL_FN

}  // namespace milesrt::log
