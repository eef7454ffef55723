#pragma once
/// A compiled Jinja template rendered as transformers' ImmutableSandboxedEnvironment renders chat
/// templates (trim_blocks, lstrip_blocks, loop controls, `{% generation %}`, `raise_exception`,
/// `strftime_now`, transformers' `tojson`). Immutable once parsed: one program may render from
/// several threads at once.

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/ast.hpp"
#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

/// What the template may see beyond its variables.
struct environment {
  /// strftime_now's clock; unset: the local time when rendering.
  std::optional<std::tm> now;
};

class program {
 public:
  /// Parses `source`; throws jinja::error naming the construct and line at fault.
  static std::shared_ptr<const program> parse(std::string_view source);

  /// Renders with `variables` (an object: messages, tools, add_generation_prompt, ...); throws
  /// jinja::error, whose message is raise_exception's for templates that raise.
  std::string render(const value& variables, const environment& env = {}) const;
  /// As render(variables), with `borrowed` (name, value) pairs read in place and before
  /// `variables`: a caller's conversation is not copied per render. The values outlive the call.
  std::string render(const value& variables,
                     const std::vector<std::pair<std::string_view, const value*>>& borrowed,
                     const environment& env = {}) const;

 private:
  body body_;
};

}  // namespace milesrt::llm::jinja
