#pragma once
/// `milesrt bench-train`: training throughput of the trainer's step (registered in main).

#include "runtime/cli/command.hpp"

namespace milesrt::app {

cli::command make_train_bench_command();

}  // namespace milesrt::app
