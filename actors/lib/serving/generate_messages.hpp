#pragma once
/// The generation service (service type "llm.generate"): a rollout actor serves it on its
/// `generate` port (runtime/core/services.hpp), so that an actor of the graph (a session server,
/// an environment) samples through the engine the rollout holds, under its weight versions, pause
/// modes and staleness bookkeeping, without a side channel into it.
///
///   (generate_atom, generation_request) -> generation_result
///
/// A request with a `stream_id` also has its tokens sent to the requester as they are sampled,
/// each engine step's new ones as one `(generate_atom, generation_partial)` message, all before
/// its result (which holds every token again: partials are a preview, the result is the record).
///
/// A request the rollout refuses (empty input, sampling values out of range, a prompt past the
/// engine's limits) is answered with an error whose text names the field.

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/messages.hpp"

namespace milesrt::serving {

/// The service types of the serving library: a `uses` port joins a `serves` port of equal type.
namespace service_type {
inline constexpr const char* generate = "llm.generate";  ///< generation_request -> result
}  // namespace service_type

using generate_atom = caf::atom_constant<caf::atom("generate")>;

/// One completion of `input_ids` (already rendered and tokenized by the caller).
struct generation_request {
  std::vector<int64_t> input_ids;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t max_tokens = 16;
  /// Besides the model's end-of-sequence token (which always stops sampling).
  std::vector<int64_t> stop_token_ids;
  /// The sampling stream's seed: a caller's own (each request of one session its own, say).
  uint64_t seed = 0;
  /// Sampling stops once the decoded output contains one of these (the token that completed it
  /// is the last one; the text is the caller's to cut). Needs the rollout's tokenizer.
  std::vector<std::string> stop;
  /// Nonzero: the tokens are also sent to the requester as they are sampled, as
  /// generation_partial messages carrying this id.
  uint64_t stream_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_request& x) {
  return f(caf::meta::type_name("generation_request"), x.input_ids, x.temperature, x.top_p,
           x.max_tokens, x.stop_token_ids, x.seed, x.stop, x.stream_id);
}

/// The tokens a streamed request sampled since its last partial (in order, none twice).
struct generation_partial {
  uint64_t stream_id = 0;
  std::vector<int64_t> output_ids;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_partial& x) {
  return f(caf::meta::type_name("generation_partial"), x.stream_id, x.output_ids, x.logprobs,
           x.versions);
}

/// What was sampled: per output token its log-prob (full vocabulary, at the sampling temperature:
/// what the trainer recomputes) and the weight version it was sampled under.
struct generation_result {
  std::vector<int64_t> output_ids;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;
  std::string finish_reason;  ///< "stop", "length" or "abort" (cut off by a weight update)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_result& x) {
  return f(caf::meta::type_name("generation_result"), x.output_ids, x.logprobs, x.versions,
           x.finish_reason);
}

}  // namespace milesrt::serving

// Built-in kinds own [first + 100, first + 1000) in blocks of 100; the serving library's service
// messages take +600.
CAF_BEGIN_TYPE_ID_BLOCK(milesrt_serving, caf::first_custom_type_id + 600)
CAF_ADD_TYPE_ID(milesrt_serving, (milesrt::serving::generation_request))
CAF_ADD_TYPE_ID(milesrt_serving, (milesrt::serving::generation_result))
CAF_ADD_TYPE_ID(milesrt_serving, (milesrt::serving::generation_partial))
CAF_END_TYPE_ID_BLOCK(milesrt_serving)
