#pragma once
#include "runtime/cli/command.hpp"

namespace milesrt::app {
/// generate_command.cpp: `milesrt generate --model DIR`.
cli::command make_generate_command();
}  // namespace milesrt::app
