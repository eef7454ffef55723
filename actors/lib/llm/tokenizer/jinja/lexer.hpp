#pragma once
/// Jinja's lexer as transformers configures it: trim_blocks and lstrip_blocks on, `-` and `+`
/// whitespace control, newlines normalised to "\n" and one trailing newline dropped.

#include <string>
#include <string_view>
#include <vector>

namespace milesrt::llm::jinja {

enum class token_kind {
  text,         ///< Template data between tags.
  var_begin,    ///< {{
  var_end,      ///< }}
  block_begin,  ///< {%
  block_end,    ///< %}
  name,
  string,  ///< Text is the literal's value, escapes resolved.
  integer,
  floating,
  op,  ///< An operator or punctuation: + - * / // % ** ~ ( ) [ ] { } , . : | = == != < <= > >=
  eof,
};

struct token {
  token_kind kind;
  std::string text;
  int line;
};

/// The tokens of `source`; throws jinja::error naming the line of an unterminated tag or string.
std::vector<token> lex(std::string_view source);

}  // namespace milesrt::llm::jinja
