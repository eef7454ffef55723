#pragma once
/// The subcommands the LLM code adds to milesrt (registered in runtime/cli/main.cpp).

#include "runtime/cli/command.hpp"

namespace milesrt::app {

/// score_command.cpp: `milesrt score --model DIR`: log-probs and entropies of token sequences.
cli::command make_score_command();
/// bench/command.cpp: `milesrt bench forward|logprobs|tokenize|rollout|train|optim|publish`
/// (bench/bench.hpp).
cli::command make_bench_command();
/// upgrade_command.cpp: `milesrt upgrade FILE`: a graph file's renamed fields rewritten in place.
cli::command make_upgrade_command();

}  // namespace milesrt::app
