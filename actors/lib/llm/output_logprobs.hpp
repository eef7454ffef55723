#pragma once
/// A frozen model's log-probs of the sampled tokens of a group: what the reference kind (the KL
/// anchor) and the teacher kind (on-policy distillation) set on each sample, from one packed
/// no-grad prefill of the group (decoder::score_sequences), at a temperature, over the full
/// vocabulary.

#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"

namespace milesrt::llm {

/// Per sample of `group`, log p(output token t | prompt + output[<t]) for each output token
/// (empty for a sample without output). Throws std::invalid_argument for a sample with output
/// but no prompt token.
std::vector<std::vector<float>> output_logprobs(const decoder& model, double temperature,
                                                const sample_group& group);

}  // namespace milesrt::llm
