#include "actors/lib/eval/evaluation.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>

#include "actors/lib/serving/engine.hpp"
#include "actors/lib/tasks/math_answer.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::eval {

eval_result evaluate(const llm::decoder& model, const llm::text_codec& codec,
                     const std::vector<tasks::data_record>& records, int64_t max_new_tokens,
                     size_t limit, const std::function<void(size_t, size_t)>& on_progress) {
  const timer t;
  at::NoGradGuard no_grad;
  const size_t n = limit == 0 ? records.size() : std::min(limit, records.size());
  serving::engine_config cfg;
  int64_t longest = 0;
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < n; ++i) {
    const auto& r = records[i];
    prompts.push_back(
        !r.prompt_ids.empty()
            ? r.prompt_ids
            : codec.encode(r.messages_json.empty() ? r.prompt : codec.render(r.messages_json)));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts.back().size()));
  }
  cfg.block_size = 16;
  cfg.max_running = 64;
  const int64_t per_seq = (longest + max_new_tokens + cfg.block_size - 1) / cfg.block_size + 1;
  cfg.num_blocks = per_seq * cfg.max_running + 16;
  cfg.max_tokens_per_step = std::max<int64_t>(512, longest * 8);
  serving::engine eng(model, cfg);
  for (size_t i = 0; i < n; ++i) {
    serving::generate_request req;
    req.id = i + 1;
    req.prompt = prompts[i];
    req.params.top_k = 1;  // greedy
    req.params.max_new_tokens = max_new_tokens;
    if (auto eos = codec.eos()) req.params.stop_token_ids.push_back(*eos);
    eng.add(req);
  }
  eval_result out;
  out.items = n;
  size_t finished = 0;
  while (!eng.idle()) {
    for (const auto& s : eng.step()) {
      const auto& r = records[s.request_id - 1];
      auto j = tasks::judge_math(codec.decode(s.output), r.label);
      out.accuracy += j.correct ? 1 : 0;
      out.answer_found += j.found ? 1 : 0;
      ++finished;
    }
    if (on_progress) on_progress(finished, n);
  }
  if (n > 0) {
    out.accuracy /= static_cast<double>(n);
    out.answer_found /= static_cast<double>(n);
  }
  out.seconds = t.seconds();
  return out;
}

}  // namespace milesrt::eval
