#pragma once
// The batch the data-parallel tests share (data_parallel, rank_pool, sharded_optimizer): two GRPO
// groups of three sequences on the tiny model's 32-token vocabulary, 69 tokens in all (9, 11, 8,
// 14, 11 and 16), and a bitwise comparison of tensors. Test-only; beside the kind because tests
// under actors/ include no test/ headers.
#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer::testing {

inline train_sequence seq(int prompt_len, int output_len, int salt, float reward, int64_t group) {
  train_sequence s;
  for (int i = 0; i < prompt_len; ++i) s.prompt.push_back((i * 7 + salt * 11 + 3) % 32);
  for (int i = 0; i < output_len; ++i) s.output.push_back((i * 5 + salt * 3 + 1) % 32);
  s.rollout_logprobs.assign(s.output.size(), -3.0f);
  s.reward = reward;
  s.group = group;
  return s;
}

inline std::vector<train_sequence> batch(int salt) {
  return {seq(5, 4, salt, 1, 0),     seq(5, 6, salt + 1, 0, 0), seq(5, 3, salt + 2, 0.5f, 0),
          seq(9, 5, salt + 3, 0, 1), seq(9, 2, salt + 4, 1, 1), seq(9, 7, salt + 5, 1, 1)};
}

inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace milesrt::trainer::testing
