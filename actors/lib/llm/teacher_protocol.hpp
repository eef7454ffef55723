#pragma once
/// The remote teacher's JSON protocol (docs/kinds.md#teacher), both sides: the teacher kind asks,
/// a server (examples/teacher_server) answers. Two POSTs under the server's base URL:
///
///   POST <base>/v1/logprobs
///     {"temperature": 1.0, "sequences": [{"prompt": [ids], "output": [ids]}, ...]}
///   -> {"logprobs": [[lp, ...], ...]}   per sequence, log p(output[t] | prompt + output[<t]) at
///      the temperature over the full vocabulary, one number per output token ([] for no output)
///
///   POST <base>/v1/tokenizer   (any body)
///   -> the teacher's tokenizer fingerprint (tokenizer_fingerprint.hpp's JSON form)
///
/// Numbers are written so that they read back as the same float (JSON's shortest round trip).

#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"

namespace milesrt::llm {

/// The /v1/logprobs request for the samples of `group`.
std::string teacher_request_body(const sample_group& group, double temperature);

/// The per-sample log-probs of an answer; throws std::invalid_argument naming the problem when the
/// body is not {"logprobs": [...]} with one list per sample of `group`, each as long as its output
/// and of finite numbers <= 0.
std::vector<std::vector<float>> parse_teacher_answer(const std::string& body,
                                                     const sample_group& group);

/// The server's side of /v1/logprobs: scores the request with `model` (output_logprobs.hpp) and
/// returns the answer body. Throws std::invalid_argument for a malformed request (not the
/// protocol's JSON, a temperature not > 0, a token id outside the vocabulary, a sequence past
/// `max_tokens` or a sequence with output but no prompt).
std::string answer_teacher_request(const decoder& model, const std::string& body,
                                   size_t max_tokens);

}  // namespace milesrt::llm
