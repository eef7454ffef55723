#include "actors/lib/llm/teacher_protocol.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/lib/llm/output_logprobs.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::llm {
namespace {
using nlohmann::json;

json parse_untrusted(const std::string& body, const char* what) {
  const auto snippet = [&] { return runtime::excerpt(body, 80); };
  if (!runtime::valid_utf8(body))
    throw std::invalid_argument(std::string("the ") + what + " is not valid UTF-8: '" + snippet() +
                                "'");
  if (auto deep = runtime::json_nesting_problem(body); !deep.empty())
    throw std::invalid_argument(std::string("the ") + what + " is " + deep);
  try {
    return json::parse(body);
  } catch (const json::exception&) {
    throw std::invalid_argument(std::string("the ") + what + " is not JSON: '" + snippet() + "'");
  }
}

std::vector<int64_t> ids_of(const json& j, const std::string& where, int64_t vocab) {
  if (!j.is_array()) throw std::invalid_argument(where + " is not an array of token ids");
  std::vector<int64_t> out;
  for (const auto& t : j) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      throw std::invalid_argument(where + " holds " + t.dump() + ", not a token id in [0, " +
                                  std::to_string(vocab) + ")");
    out.push_back(t.get<int64_t>());
  }
  return out;
}

}  // namespace

std::string teacher_request_body(const sample_group& group, double temperature) {
  json seqs = json::array();
  for (const auto& s : group.samples) seqs.push_back({{"prompt", s.prompt}, {"output", s.output}});
  return json({{"temperature", temperature}, {"sequences", std::move(seqs)}}).dump();
}

std::vector<std::vector<float>> parse_teacher_answer(const std::string& body,
                                                     const sample_group& group) {
  const auto j = parse_untrusted(body, "answer");
  if (!j.is_object() || !j.contains("logprobs") || !j["logprobs"].is_array())
    throw std::invalid_argument("the answer has no \"logprobs\" array: '" +
                                runtime::excerpt(body, 80) + "'");
  const auto& all = j["logprobs"];
  if (all.size() != group.samples.size())
    throw std::invalid_argument("the answer has " + std::to_string(all.size()) +
                                " lists of log-probs for " + std::to_string(group.samples.size()) +
                                " samples");
  std::vector<std::vector<float>> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string where = "logprobs[" + std::to_string(i) + "]";
    const size_t n = group.samples[i].output.size();
    if (!all[i].is_array() || all[i].size() != n)
      throw std::invalid_argument(where + " is not a list of " + std::to_string(n) +
                                  " numbers (one per output token)");
    for (const auto& v : all[i]) {
      const double d = v.is_number() ? v.get<double>() : NAN;
      if (!std::isfinite(d) || d > 0)
        throw std::invalid_argument(where + " holds " + v.dump() + ", not a log-prob (<= 0)");
      out[i].push_back(static_cast<float>(d));
    }
  }
  return out;
}

namespace {

/// The request's sequences as a group (std::invalid_argument for a malformed one).
sample_group request_group(const json& j, int64_t vocab, size_t max_tokens) {
  if (!j.is_object() || !j.contains("sequences") || !j["sequences"].is_array())
    throw std::invalid_argument("the request has no \"sequences\" array");
  sample_group group;
  for (size_t i = 0; i < j["sequences"].size(); ++i) {
    const auto& s = j["sequences"][i];
    const std::string where = "sequences[" + std::to_string(i) + "]";
    if (!s.is_object()) throw std::invalid_argument(where + " is not an object");
    sample_msg m;
    m.prompt = ids_of(s.value("prompt", json::array()), where + ".prompt", vocab);
    m.output = ids_of(s.value("output", json::array()), where + ".output", vocab);
    if (m.prompt.size() + m.output.size() > max_tokens)
      throw std::invalid_argument(where + " has more than " + std::to_string(max_tokens) +
                                  " tokens");
    group.samples.push_back(std::move(m));
  }
  return group;
}

}  // namespace

std::string answer_teacher_request(const decoder& model, const std::string& body,
                                   size_t max_tokens) {
  const auto j = parse_untrusted(body, "request");
  double temperature = 1.0;
  sample_group group;
  try {
    if (j.is_object() && j.contains("temperature")) temperature = j["temperature"].get<double>();
    group = request_group(j, model.config().vocab_size, max_tokens);
  } catch (const json::exception& e) {  // a field of the wrong type
    throw std::invalid_argument(std::string("a malformed request: ") + e.what());
  }
  if (!(temperature > 0)) throw std::invalid_argument("temperature must be > 0");
  const auto lps = output_logprobs(model, temperature, group);
  json out = json::array();
  for (const auto& lp : lps) out.push_back(lp);
  return json({{"logprobs", std::move(out)}}).dump();
}

}  // namespace milesrt::llm
