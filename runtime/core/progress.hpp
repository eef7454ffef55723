#pragma once
/// Progress of long work (loading a model, writing a checkpoint, an evaluation): on a terminal a
/// bar redrawn in place, elsewhere plain lines (the start, at most one per 10% and 2 s, the end).
/// Writes nothing when its stream is null (`milesrt run --quiet`).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace milesrt::runtime {

class progress_meter {
 public:
  /// `what` names the work ("loading model runs/x", "checkpoint step 4"); `total` units of it.
  progress_meter(std::FILE* out, std::string what, uint64_t total);
  ~progress_meter();
  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;

  /// `done` of `total` units are done.
  void update(uint64_t done);
  /// The work ended (the destructor calls it too); writes the time it took.
  void finish();

  /// The line of a bar 30 characters wide, e.g. "eval [#########.....] 45% 9/20 1.2 s".
  static std::string bar(const std::string& what, uint64_t done, uint64_t total, double seconds);

 private:
  double elapsed() const;

  std::FILE* out_;
  std::string what_;
  uint64_t total_, done_ = 0;
  bool tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(),
                                        last_line_ = start_;
  uint64_t last_tenth_ = 0;
};

}  // namespace milesrt::runtime
