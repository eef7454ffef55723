#pragma once
/// Jinja's grammar (the parts chat templates use) from tokens to a syntax tree. Unknown tags and
/// constructs are errors naming the construct and its line.

#include <string_view>

#include "actors/lib/llm/tokenizer/jinja/ast.hpp"

namespace milesrt::llm::jinja {

/// Parses a whole template; throws jinja::error.
body parse(std::string_view source);

}  // namespace milesrt::llm::jinja
