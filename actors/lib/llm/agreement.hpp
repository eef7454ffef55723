#pragma once
/// Values of graph settings (runtime/core/kind.hpp, kind_descriptor::graph_settings) that the LLM
/// kinds state alike: the rollout samples at a temperature, and the trainer and the reference
/// model take their log-probs at the same one (else every importance ratio is off).

#include <charconv>
#include <string>

namespace milesrt::llm {

/// The temperature as the setting compares it: shortest round-trip text ("1", "0.7").
inline std::string temperature_agreement(double t) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, t);
  return std::string(buf, r.ptr);
}

}  // namespace milesrt::llm
