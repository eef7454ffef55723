#include "runtime/metrics/page_sink.hpp"

#include "runtime/metrics/page_data.hpp"

namespace milesrt::runtime {

page_sink::page_sink(http_server& server, std::vector<std::string> charts)
    : charts_(std::move(charts)) {
  live_["state"] = "starting";
  live_["actors"] = nlohmann::json::array();
  live_["edges"] = nlohmann::json::array();
  page_source source;
  source.live = [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    auto j = live_;
    j["charts"] = charts_;
    j["source"] = "run";
    return j;
  };
  source.steps = [this](uint64_t since) {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : steps_)
      if (s["step"].get<uint64_t>() > since) out.push_back(s);
    return out;
  };
  add_page_routes(server, std::move(source));
}

void page_sink::on_step(const metric_frame& frame) {
  auto j = to_json(frame);
  std::lock_guard<std::mutex> lock(mutex_);
  steps_.push_back(std::move(j));
}

void page_sink::on_live(const live_view& view) {
  auto j = to_json(view);
  std::lock_guard<std::mutex> lock(mutex_);
  live_ = std::move(j);
}

}  // namespace milesrt::runtime
