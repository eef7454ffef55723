#pragma once
/// The `tensorboard` sink: TensorBoard event files written natively (TFRecord framing, Event and
/// Summary messages from schemas/tensorboard/event.proto). Per step every value as a scalar
/// (a float64 tensor with the `scalars` plugin's metadata, so values keep all their digits) and
/// every distribution as a histogram.

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/metrics/metric_sink.hpp"

namespace milesrt::runtime {

class tensorboard_sink : public metric_sink {
 public:
  /// Creates `dir` and a new events.out.tfevents.<seconds>.<host>.<pid> file in it (a resumed
  /// run adds a file; TensorBoard reads them all). Throws naming the file when it cannot.
  explicit tensorboard_sink(const std::filesystem::path& dir);
  void on_step(const metric_frame& frame) override;

  const std::filesystem::path& file() const { return file_; }

 private:
  void write(const std::string& serialized_event);

  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace milesrt::runtime
