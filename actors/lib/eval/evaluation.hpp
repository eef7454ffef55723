#pragma once
/// Held-out evaluation: greedy decoding of a dataset's prompts with the rollout engine over the
/// trainer's own weights, answers judged like the math reward.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"

namespace milesrt::eval {

struct eval_result {
  double accuracy = 0;      ///< correct / items
  double answer_found = 0;  ///< items with an extractable answer / items
  size_t items = 0;
  double seconds = 0;
};

/// Greedy (top-k 1) completions of the first `limit` records (0 = all), at most `max_new_tokens`
/// each, stopping at the tokenizer's end-of-sequence token. `on_progress(done, total)`, when
/// given, is called as completions finish.
eval_result evaluate(const llm::decoder& model, const llm::text_codec& codec,
                     const std::vector<tasks::data_record>& records, int64_t max_new_tokens,
                     size_t limit, const std::function<void(size_t, size_t)>& on_progress = {});

}  // namespace milesrt::eval
