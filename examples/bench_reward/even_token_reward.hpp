#pragma once
/// The benchmark reward `even_token_reward`: a completion earns the share of its tokens whose id is
/// even. It needs no tokenizer and varies from sample to sample even when every completion runs to
/// the same length (random-weight models rarely stop early), so the group filter keeps the groups
/// and every step trains. `graphs/bench_rl_*.capnp` use it; `test/peers/hf_rl_loop.py` computes
/// the same. Built as a plugin (plugin.cpp), like examples/custom_reward.

#include <cstdint>
#include <vector>

#include "runtime/core/kind.hpp"

namespace milesrt::examples {

/// The share of `tokens` whose id is even; 0 for none.
double even_token_share(const std::vector<int64_t>& tokens);

/// Adds `even_token_reward` (no params) and its message types.
void register_even_token_reward(runtime::kind_registry& registry);

}  // namespace milesrt::examples
