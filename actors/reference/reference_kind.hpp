#pragma once
/// The `reference` actor kind: a frozen reference model. A stage between the reward and the
/// trainer that sets each sample's ref_logprobs = log p_ref(output token | prompt + previous
/// output) at the trainer's temperature over the full vocabulary, for the KL terms. In and out:
/// "groups" (llm.scored_group). Params: ReferenceParams (schemas/reference.capnp).

#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::reference {

/// Registers the kind "reference" and the message types it carries.
void register_reference_kind(runtime::kind_registry& registry);

/// Sets ref_logprobs of every sample of `group` from one packed no-grad pass of `model`
/// (samples without output get none). Throws std::invalid_argument for a sample with output but
/// no prompt token.
void set_ref_logprobs(const llm::decoder& model, double temperature, llm::sample_group& group);

}  // namespace milesrt::reference
