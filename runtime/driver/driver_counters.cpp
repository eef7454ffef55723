#include "runtime/driver/driver_counters.hpp"

namespace milesrt::runtime {
namespace {

using field = uint64_t driver_counters::*;

constexpr std::array<std::pair<std::string_view, field>, driver_counters::count> fields{{
    {"admitted", &driver_counters::admitted},
    {"accepted", &driver_counters::accepted},
    {"dropped_stale", &driver_counters::dropped_stale},
    {"filtered", &driver_counters::filtered},
    {"surplus", &driver_counters::surplus},
    {"stale_violations", &driver_counters::stale_violations},
    {"restarts", &driver_counters::restarts},
    {"requeued", &driver_counters::requeued},
    {"in_flight", &driver_counters::in_flight},
    {"buffered", &driver_counters::buffered},
    {"items_rejected", &driver_counters::items_rejected},
}};

}  // namespace

std::array<std::pair<std::string_view, uint64_t>, driver_counters::count> driver_counters::named()
    const {
  std::array<std::pair<std::string_view, uint64_t>, count> out;
  for (size_t i = 0; i < count; ++i) out[i] = {fields[i].first, this->*fields[i].second};
  return out;
}

bool driver_counters::set(std::string_view name, uint64_t value) {
  for (const auto& [n, member] : fields) {
    if (n != name) continue;
    this->*member = value;
    return true;
  }
  return false;
}

bool operator==(const driver_counters& a, const driver_counters& b) {
  return a.named() == b.named();
}

}  // namespace milesrt::runtime
