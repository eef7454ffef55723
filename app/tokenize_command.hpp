#pragma once
/// `milesrt tokenize --model DIR`: JSON lines in, JSON lines out, through the model's tokenizer and
/// chat template.

#include "runtime/cli/command.hpp"

namespace milesrt::app {

/// tokenize_command.cpp
cli::command make_tokenize_command();

}  // namespace milesrt::app
