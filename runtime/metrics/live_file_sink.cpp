#include "runtime/metrics/live_file_sink.hpp"

#include <fstream>

#include "runtime/metrics/page_data.hpp"

namespace milesrt::runtime {
namespace fs = std::filesystem;

live_file_sink::live_file_sink(fs::path run_dir, std::vector<std::string> charts)
    : file_(std::move(run_dir) / "live.json"), charts_(std::move(charts)) {}

void live_file_sink::on_live(const live_view& view) {
  auto now = std::chrono::steady_clock::now();
  if (view.state == "running" && now - last_ < std::chrono::milliseconds(500)) return;
  last_ = now;
  auto j = to_json(view);
  j["charts"] = charts_;
  fs::path tmp = file_;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // the page of `watch` is a convenience: a full disk must not fail the run
    // An error message may quote a remote server's bytes: replaced, never a throw in the driver.
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::error_code ec;
  fs::rename(tmp, file_, ec);
}

}  // namespace milesrt::runtime
