#pragma once
/// The messages of an OpenAI-style conversation as a session keeps them: checked (each field
/// named when it is wrong), compared with the messages a session already holds (is the request
/// an extension of them?), and put in the form chat templates are written for.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace milesrt::agent {

/// Why `messages` is not a conversation: "" when it is one. Each message is an object with a
/// string `role`; `content` a string, null or a list of parts (`{"type": "text", "text": ...}`
/// for text); `tool_calls` a list of `{"function": {"name": string, "arguments": string or
/// object}}`; `tool_call_id` and `name` strings. The answer names the field:
/// `messages[2].tool_calls[0].function.name: expected a string`.
std::string check_messages(const nlohmann::ordered_json& messages);

/// Whether two messages say the same, as a client that sends back what it was answered may
/// reshape them: `role`, `content` (null, missing and "" alike; a list of text parts as their
/// text), `tool_calls` (name; arguments as JSON, however spaced or whether a string or an object;
/// `id` when both carry one), `tool_call_id` and `name`. Other fields (`reasoning_content`,
/// `refusal`, ...) are not compared: what the model sampled is kept as tokens anyway.
bool same_message(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

/// The index of the first of `stored` that `request` does not repeat (same_message), or
/// `stored.size()` when `request` repeats them all; nullopt when it does. Both are checked lists.
std::optional<size_t> first_difference(const nlohmann::ordered_json& stored,
                                       const nlohmann::ordered_json& request);

/// `messages` as chat templates expect them (transformers' documented form): content a string
/// ("" for null or missing; Qwen3's template tests `'</think>' in message.content`), lists of
/// text parts joined into one, and tool call arguments given as a JSON string parsed into an
/// object (Llama 3.1's template writes them with `tojson`).
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages);

}  // namespace milesrt::agent
