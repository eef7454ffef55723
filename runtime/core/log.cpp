#include "runtime/core/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace milesrt::log {
namespace {

std::atomic<int> g_level{static_cast<int>(level::info)};
std::atomic<bool> g_json{false};

constexpr const char* kLevelNames[] = {"trace", "debug", "info", "warn", "error", "off"};

spdlog::logger& sink() {
  // One logger writing pre-formatted lines to stderr; spdlog serialises the threads' writes.
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("milesrt",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%v");
    l->set_level(spdlog::level::trace);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

}  // namespace

void configure(std::string_view level_name, std::string_view format_name) {
  int found = -1;
  for (int i = 0; i < 6; ++i)
    if (level_name == kLevelNames[i]) found = i;
  if (found < 0)
    throw std::invalid_argument("log level '" + std::string(level_name) +
                                "' is not one of trace, debug, info, warn, error, off");
  if (format_name != "text" && format_name != "json")
    throw std::invalid_argument("log format '" + std::string(format_name) +
                                "' is not one of text, json");
  g_level = found;
  g_json = format_name == "json";
}

std::string level_name() { return kLevelNames[g_level.load()]; }
std::string format_name() { return g_json ? "json" : "text"; }

level threshold() { return static_cast<level>(g_level.load()); }

void write(level l, const at& where, std::string_view message) {
  const char* name = kLevelNames[static_cast<int>(l)];
  std::string line;
  if (g_json) {
    nlohmann::ordered_json j;
    j["time"] = timestamp();
    j["level"] = name;
    if (!where.actor.empty()) j["actor"] = where.actor;
    if (where.step) j["step"] = *where.step;
    j["message"] = message;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = fmt::format("{} {:<5} ", timestamp(), name);
    if (!where.actor.empty())
      line += "[" + where.actor + (where.step ? fmt::format(" step {}", *where.step) : "") + "] ";
    else if (where.step)
      line += fmt::format("[step {}] ", *where.step);
    line += message;
  }
  sink().log(spdlog::level::info, line);
}

}  // namespace milesrt::log
