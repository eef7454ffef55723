#include "actors/trainer/trainer_batch.hpp"

#include <stdexcept>

#include "actors/lib/llm/messages.hpp"

namespace milesrt::trainer {
using runtime::envelope;

namespace {
std::vector<int64_t> tokenize_prompt(const trainer_state& st, const llm::prompt_msg& p) {
  if (!p.ids.empty()) return p.ids;
  if (!st.codec)
    throw std::invalid_argument("SFT items need a tokenizer.json in the trainer's model folder");
  if (!p.messages_json.empty()) return st.codec->encode(st.codec->render(p.messages_json));
  return st.codec->encode(p.text);
}
}  // namespace

std::vector<train_sequence> to_sequences(const trainer_state& st,
                                         const std::vector<envelope>& batch,
                                         std::map<std::string, double>& metrics) {
  std::vector<train_sequence> out;
  double correct = 0, samples = 0, truncated = 0;
  for (size_t g = 0; g < batch.size(); ++g) {
    const auto& payload = batch[g].payload;
    if (payload.match_elements<llm::sample_group>()) {
      const auto& group = payload.get_as<llm::sample_group>(0);
      for (const auto& s : group.samples) {
        train_sequence t;
        t.prompt = s.prompt;
        t.output = s.output;
        t.rollout_logprobs = s.logprobs;
        t.versions = s.versions;
        t.ref_logprobs = s.ref_logprobs;
        t.teacher_logprobs = s.teacher_logprobs;
        t.values = s.values;
        t.experts = s.experts;
        t.mask = s.mask;
        t.reward = s.reward;
        t.group = static_cast<int64_t>(g);
        out.push_back(std::move(t));
        samples += 1;
        truncated += s.finish_reason == "length" ? 1 : 0;
      }
    } else if (payload.match_elements<llm::prompt_msg>()) {
      const auto& p = payload.get_as<llm::prompt_msg>(0);
      if (p.response.empty()) {
        throw std::invalid_argument("SFT item of group " + std::to_string(p.group_id) +
                                    " has no response");
      }
      train_sequence t;
      t.prompt = tokenize_prompt(st, p);
      t.output = st.codec->encode(p.response);
      if (auto eos = st.codec->eos()) t.output.push_back(*eos);
      t.group = static_cast<int64_t>(g);
      out.push_back(std::move(t));
    } else {
      throw std::invalid_argument("item " + std::to_string(batch[g].origin) +
                                  " is neither a scored group nor a prompt: " + to_string(payload));
    }
  }
  (void)correct;
  // Responses cut at the rollout's maxNewTokens rather than ended by the model.
  if (samples > 0) metrics["response_truncated_frac"] = truncated / samples;
  return out;
}

}  // namespace milesrt::trainer
