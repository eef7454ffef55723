#pragma once
/// The syntax tree of a Jinja template: expressions and statements, each with its template line.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

enum class expr_kind {
  literal,  ///< lit
  name,     ///< name
  list,     ///< args (also tuples)
  dict,     ///< args: key, value, key, value...
  attr,     ///< object.name
  index,    ///< object[args[0]]
  slice,    ///< object[args[0]:args[1]:args[2]] (null entries: omitted)
  call,     ///< object(args, kwargs)
  filter,   ///< object|name(args, kwargs)
  test,     ///< object is [not] name(args)
  unary,    ///< name is "-", "+" or "not"; object
  binary,   ///< name is the operator; args[0], args[1]
  compare,  ///< args[0] ops[0] args[1] ops[1] args[2] ...
  logical,  ///< name is "and" or "or"; args[0], args[1]
  cond,     ///< args[0] if args[1] else args[2] (args[2] may be null)
  block,    ///< the body of a {% filter %} block
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  expr_kind kind;
  int line = 0;
  std::string name;
  value lit;
  expr_ptr object;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  /// Whether evaluating this expression may run template code (a call of a name: a macro or
  /// `caller`), which can assign namespace attributes; set by program::parse.
  bool may_run_code = false;
};

enum class stmt_kind {
  text,        ///< text
  output,      ///< {{ value }}
  if_,         ///< branches (a null condition is `else`)
  for_,        ///< for targets in value [if cond]: body [else: else_body]
  set,         ///< targets = value, or name.attr = value
  set_block,   ///< {% set name %}body{% endset %} (value: optional filter chain over a block expr)
  macro,       ///< {% macro name(params) %}body
  call_block,  ///< {% call(params) value %}body: value is a call of a macro
  filter_block,  ///< value: a filter chain over a block expr
  generation,    ///< {% generation %}body
  with_,         ///< {% with params %}body
  break_,
  continue_,
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

struct stmt {
  stmt_kind kind;
  int line = 0;
  std::string text;
  std::vector<std::string> targets;
  std::string attr;
  expr_ptr value;
  expr_ptr cond;
  std::vector<std::pair<expr_ptr, body>> branches;
  std::vector<std::pair<std::string, expr_ptr>> params;
  body main;
  body else_body;
};

}  // namespace milesrt::llm::jinja
