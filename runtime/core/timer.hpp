#pragma once
/// The one way milesrt times what it does: a `timer` says the seconds since it started; a
/// `scoped_timer` adds the seconds of its scope to a number (a metric) when the scope ends.
///
///   timer t;  ...  m["stage_seconds"] = t.seconds();
///   { scoped_timer s(m["eval_seconds"]);  ... }

#include <chrono>

namespace milesrt {

class timer {
 public:
  using clock = std::chrono::steady_clock;
  timer() : start_(clock::now()) {}
  /// Seconds since it was made (or last restarted).
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  double milliseconds() const { return seconds() * 1e3; }
  /// The seconds so far; counting starts again.
  double restart() {
    const auto now = clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }
  clock::time_point started() const { return start_; }

 private:
  clock::time_point start_;
};

/// Adds the seconds between its making and its end to `into`.
class scoped_timer {
 public:
  explicit scoped_timer(double& into) : into_(into) {}
  ~scoped_timer() { into_ += t_.seconds(); }
  scoped_timer(const scoped_timer&) = delete;
  scoped_timer& operator=(const scoped_timer&) = delete;

 private:
  double& into_;
  timer t_;
};

}  // namespace milesrt
