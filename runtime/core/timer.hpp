#pragma once
/// The one way milesrt times what it does: a `timer` says the seconds since it started.
///
///   const timer t;  ...  m["stage_seconds"] = t.seconds();

#include <chrono>

namespace milesrt {

class timer {
 public:
  using clock = std::chrono::steady_clock;
  timer() : start_(clock::now()) {}
  /// Seconds since it was made.
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  double milliseconds() const { return seconds() * 1e3; }

 private:
  clock::time_point start_;
};

}  // namespace milesrt
