#pragma once
// A run's metrics.jsonl as the e2e tests read it: one JSON object a logged step, in order.
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/support.hpp"

namespace milesrt::testing {

/// Every non-blank line of `run`/metrics.jsonl, parsed (a malformed line fails the parse).
inline std::vector<nlohmann::json> steps_of(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace milesrt::testing
