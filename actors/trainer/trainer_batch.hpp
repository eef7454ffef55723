#pragma once
/// A training step's batch as the trainer core's sequences.

#include <map>
#include <string>
#include <vector>

#include "actors/trainer/trainer_state.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::trainer {

/// The batch's items as training sequences: scored groups (RL) or prompts with a response (SFT),
/// the latter tokenized with the state's codec. Adds response_truncated_frac to `metrics`.
std::vector<train_sequence> to_sequences(const trainer_state& st,
                                         const std::vector<runtime::envelope>& batch,
                                         std::map<std::string, double>& metrics);

}  // namespace milesrt::trainer
