#include "runtime/metrics/tensorboard_sink.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "milesrt/tensorboard/event.pb.h"
#include "runtime/metrics/tfrecord.hpp"

namespace milesrt::runtime {
namespace fs = std::filesystem;
namespace tb = milesrt::tensorboard;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void add_scalar(tb::Summary& summary, const std::string& tag, double value) {
  auto* v = summary.add_value();
  v->set_tag(tag);
  auto* meta = v->mutable_metadata();
  meta->mutable_plugin_data()->set_plugin_name("scalars");
  meta->set_data_class(tb::DATA_CLASS_SCALAR);
  auto* t = v->mutable_tensor();
  t->set_dtype(tb::DT_DOUBLE);
  t->mutable_tensor_shape();  // rank 0
  t->add_double_val(value);
}

void add_histogram(tb::Summary& summary, const metric_distribution& d) {
  if (d.counts.empty()) return;
  auto* v = summary.add_value();
  v->set_tag(d.tag());
  auto* h = v->mutable_histo();
  double num = 0, sum = 0, squares = 0;
  for (const auto& [x, n] : d.counts) {
    num += n;
    sum += x * n;
    squares += x * x * n;
  }
  h->set_min(d.counts.front().first);
  h->set_max(d.counts.back().first);
  h->set_num(num);
  h->set_sum(sum);
  h->set_sum_squares(squares);
  for (const auto& [edge, n] : histogram_buckets(d)) {
    h->add_bucket_limit(edge);
    h->add_bucket(n);
  }
}

}  // namespace

tensorboard_sink::tensorboard_sink(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
  const double t = now_seconds();
  file_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + "." +
                 host_name() + "." + std::to_string(::getpid()));
  out_.open(file_, std::ios::binary | std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write " + file_.string());
  tb::Event e;
  e.set_wall_time(t);
  e.set_file_version("brain.Event:2");
  write(e.SerializeAsString());
}

void tensorboard_sink::write(const std::string& serialized_event) {
  out_ << tfrecord(serialized_event);
  out_.flush();
}

void tensorboard_sink::on_step(const metric_frame& frame) {
  tb::Event e;
  e.set_wall_time(frame.wall_time > 0 ? frame.wall_time : now_seconds());
  e.set_step(static_cast<int64_t>(frame.step));
  auto* summary = e.mutable_summary();
  for (const auto& v : frame.values) add_scalar(*summary, v.tag(), v.value);
  for (const auto& d : frame.distributions) add_histogram(*summary, d);
  write(e.SerializeAsString());
}

}  // namespace milesrt::runtime
