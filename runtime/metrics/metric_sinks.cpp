#include "runtime/metrics/metric_sinks.hpp"

#include <chrono>
#include <stdexcept>

#include "runtime/driver/driver.hpp"
#include "runtime/metrics/live_file_sink.hpp"
#include "runtime/metrics/page_sink.hpp"
#include "runtime/metrics/prometheus_sink.hpp"
#include "runtime/metrics/tensorboard_sink.hpp"

namespace milesrt::runtime {

metric_sinks::metric_sinks(const sink_options& o) {
  sinks_.push_back(std::make_unique<live_file_sink>(o.run_dir, o.charts));
  if (o.tensorboard) {
#ifdef MILESRT_HAVE_TENSORBOARD
    sinks_.push_back(std::make_unique<tensorboard_sink>(o.run_dir / "tensorboard"));
#else
    throw std::runtime_error(
        "sink 'tensorboard': this milesrt was built without protobuf (Debian protobuf-compiler and "
        "libprotobuf-dev, which .ci/install brings)");
#endif
  }
  if (o.prometheus || o.page) server_ = std::make_unique<http_server>(o.port);
  if (o.prometheus) sinks_.push_back(std::make_unique<prometheus_sink>(*server_));
  if (o.page) sinks_.push_back(std::make_unique<page_sink>(*server_, o.charts));
  if (server_) server_->start();
}

metric_sinks::~metric_sinks() { server_.reset(); }

void metric_sinks::on_step(const step_record& r) {
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto frame = to_frame(r, now);
  for (auto& s : sinks_) s->on_step(frame);
}

void metric_sinks::on_live(const live_view& v) {
  for (auto& s : sinks_) s->on_live(v);
}

void metric_sinks::on_finish() {
  for (auto& s : sinks_) s->on_finish();
}

std::string metric_sinks::url() const {
  return server_ ? "http://127.0.0.1:" + std::to_string(server_->port()) + "/" : "";
}

}  // namespace milesrt::runtime
