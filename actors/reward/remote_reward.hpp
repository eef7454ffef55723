#pragma once
/// Rewards from a remote HTTP server: one POST per sample group.
///
/// Request:  {"group_id": 7, "label": "...", "samples": [{"prompt_ids": [...], "output_ids": [...],
///            "text": "..."}, ...]}
/// Answer:   {"rewards": [r0, r1, ...]}  (one number per sample, in order)

#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"

namespace milesrt::reward {

struct remote_reward_config {
  std::string url;
  double timeout_seconds = 10;   ///< per attempt
  uint32_t retries = 2;          ///< further attempts after a failed one
  double backoff_seconds = 0.2;  ///< before the first retry; doubles each time (at most 5 s)
};

/// The JSON request for one group.
std::string reward_request_body(const llm::sample_group& group);

/// The rewards of an answer body; throws std::invalid_argument naming the problem when the body is
/// not {"rewards": [numbers]} with `count` numbers.
std::vector<float> parse_reward_answer(const std::string& body, size_t count);

/// Asks the server for the group's rewards. Timeouts, connection failures and 5xx answers are
/// retried with backoff; a 4xx or malformed answer is not. Throws std::runtime_error
/// "POST <url>: <problem>" when no attempt succeeds.
std::vector<float> fetch_rewards(const remote_reward_config& config,
                                 const llm::sample_group& group);

}  // namespace milesrt::reward
