#include "runtime/core/progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace milesrt::runtime {

progress_meter::progress_meter(std::FILE* out, std::string what, uint64_t total)
    : out_(out),
      what_(std::move(what)),
      total_(total),
      tty_(out != nullptr && isatty(fileno(out))) {
  if (out_ == nullptr) return;
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", bar(what_, 0, total_, 0).c_str());
  } else {
    std::fprintf(out_, "%s: 0/%llu\n", what_.c_str(), static_cast<unsigned long long>(total_));
  }
  std::fflush(out_);
}

progress_meter::~progress_meter() { finish(); }

double progress_meter::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string progress_meter::bar(const std::string& what, uint64_t done, uint64_t total,
                                double seconds) {
  const int width = 30;
  const double frac = total == 0 ? 1.0 : std::min(1.0, double(done) / double(total));
  const int filled = static_cast<int>(frac * width + 0.5);
  std::string s = what + " [" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%3d%% %llu/%llu %.1f s", static_cast<int>(frac * 100 + 0.5),
                static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                seconds);
  return s + buf;
}

void progress_meter::update(uint64_t done) {
  done_ = std::min(done, total_);
  if (out_ == nullptr || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", bar(what_, done_, total_, elapsed()).c_str());
  } else {
    const uint64_t tenth = total_ == 0 ? 10 : done_ * 10 / total_;
    if (tenth <= last_tenth_ || now - last_line_ < std::chrono::seconds(2) || done_ == total_)
      return;
    last_tenth_ = tenth;
    last_line_ = now;
    std::fprintf(out_, "%s: %llu/%llu\n", what_.c_str(), static_cast<unsigned long long>(done_),
                 static_cast<unsigned long long>(total_));
  }
  std::fflush(out_);
}

void progress_meter::finish() {
  if (finished_) return;
  finished_ = true;
  if (out_ == nullptr) return;
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s\n", bar(what_, done_, total_, elapsed()).c_str());
  } else {
    std::fprintf(out_, "%s: %llu/%llu in %.1f s\n", what_.c_str(),
                 static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                 elapsed());
  }
  std::fflush(out_);
}

}  // namespace milesrt::runtime
