#pragma once
/// The messages the kinds exchange, owned by milesrt_llm: prompts, samples and sample groups.
/// Every sample carries the weight version of each token.

#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/messages.hpp"

namespace milesrt::llm {

/// The port types of the LLM dataflow: an edge joins ports of equal type (runtime/core/kind.hpp).
namespace port_type {
inline constexpr const char* prompt = "llm.prompt";              ///< a prompt_msg
inline constexpr const char* sample_group = "llm.sample_group";  ///< a sample_group, as sampled
inline constexpr const char* scored_group = "llm.scored_group";  ///< a sample_group with rewards
}  // namespace port_type

/// One prompt of a group (port type "llm.prompt"): token ids, chat messages (a JSON array) that
/// the rollout renders with its chat template and tokenizes, or plain text tokenized as it is.
/// The first of ids / messages_json / text that is set is used. For SFT, `response` holds the
/// target completion as text.
struct prompt_msg {
  uint64_t group_id = 0;
  std::vector<int64_t> ids;
  std::string label;  ///< the reference answer, for reward actors
  std::string messages_json;
  std::string text;
  std::string response;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prompt_msg& x) {
  return f(caf::meta::type_name("prompt_msg"), x.group_id, x.ids, x.label, x.messages_json, x.text,
           x.response);
}

/// One sampled completion.
struct sample_msg {
  std::vector<int64_t> prompt;
  std::vector<int64_t> output;
  std::vector<float> logprobs;     ///< per output token, full vocabulary, sampling temperature
  std::vector<uint64_t> versions;  ///< per output token
  std::vector<int64_t> experts;    ///< MoE: per token of prompt+output-1, per layer, top-k (flat)
  std::string finish_reason;
  std::string text;  ///< the output decoded (special tokens skipped); "" without a tokenizer
  // Filled by later stages (port type "llm.scored_group" and after):
  float reward = 0;                 ///< the reward actor's score
  std::vector<float> ref_logprobs;  ///< a reference model's log-probs of the output tokens
  /// A teacher's log-probs of the output tokens (on-policy distillation), apart from the KL
  /// reference's, so that both terms can be trained at once.
  std::vector<float> teacher_logprobs;
  std::vector<float> values;  ///< a critic's value estimate before each output token
  /// Per output token: 1 the model sampled it (trained on), 0 the environment supplied it (a tool's
  /// or user's message in a multi-turn trajectory: context only). Empty: every token sampled.
  std::vector<uint8_t> mask;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sample_msg& x) {
  return f(caf::meta::type_name("sample_msg"), x.prompt, x.output, x.logprobs, x.versions,
           x.experts, x.finish_reason, x.text, x.reward, x.ref_logprobs, x.teacher_logprobs,
           x.values, x.mask);
}

/// The n samples of one prompt. The same struct travels on three port types, so that the graph
/// says what has been done to it: "llm.sample_group" (sampled), "llm.scored_group" (rewards set,
/// maybe reference log-probs and values), which the trainer consumes.
struct sample_group {
  uint64_t group_id = 0;
  std::string label;
  std::vector<sample_msg> samples;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sample_group& x) {
  return f(caf::meta::type_name("sample_group"), x.group_id, x.label, x.samples);
}

}  // namespace milesrt::llm

// The built-in kinds' libraries own [first + 100, first + 1000) in blocks of 100: milesrt_llm
// +100 (here), milesrt_weights +200 (actors/lib/weights/messages.hpp), milesrt_serving +600
// (actors/lib/serving/generate_messages.hpp).
CAF_BEGIN_TYPE_ID_BLOCK(milesrt_llm, caf::first_custom_type_id + 100)
CAF_ADD_TYPE_ID(milesrt_llm, (milesrt::llm::prompt_msg))
CAF_ADD_TYPE_ID(milesrt_llm, (milesrt::llm::sample_msg))
CAF_ADD_TYPE_ID(milesrt_llm, (milesrt::llm::sample_group))
CAF_ADD_TYPE_ID(milesrt_llm, (std::vector<milesrt::llm::sample_msg>))
CAF_END_TYPE_ID_BLOCK(milesrt_llm)
