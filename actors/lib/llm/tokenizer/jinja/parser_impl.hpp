#pragma once
/// The recursive-descent parser behind parse() (parser.hpp): a cursor over the lexer's tokens and
/// one rule per construct. Its code is split by job: parser.cpp (the cursor, bodies of statements,
/// nesting bounds), parser_statements.cpp (one function per tag) and parser_expressions.cpp
/// (expressions by precedence, filters, tests, calls and subscripts).

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/ast.hpp"
#include "actors/lib/llm/tokenizer/jinja/lexer.hpp"

namespace milesrt::llm::jinja {

/// The deepest nesting a template may have: brackets, operators, filters and tags within one
/// another (as transformers, whose Jinja parser and renderer recurse in Python, have a bound).
constexpr int max_nesting = 100;

/// A new expression node of kind `k` at `line`.
inline expr_ptr make_expr(expr_kind k, int line) {
  auto e = std::make_unique<expr>();
  e->kind = k;
  e->line = line;
  return e;
}

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  body run() {
    std::string end;
    body b = parse_body({}, end);
    return b;
  }

 private:
  const token& cur() const { return t_[i_]; }
  const token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().kind == token_kind::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == token_kind::name && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const { throw error(what, cur().line); }

  // Counts one level of the parser's recursion; refuses a template nested deeper than
  // max_nesting before the recursion can exhaust the stack.
  struct nested {
    explicit nested(parser& p) : p_(p) {
      if (++p_.depth_ > max_nesting) {
        --p_.depth_;
        p_.fail("nested deeper than " + std::to_string(max_nesting) +
                " levels (brackets, operators, filters or tags)");
      }
    }
    ~nested() { --p_.depth_; }
    nested(const nested&) = delete;
    nested& operator=(const nested&) = delete;
    parser& p_;
  };

  // -- the cursor and bodies (parser.cpp) --
  stmt_ptr checked(stmt_ptr s);
  std::string describe(const token& t) const;
  void expect_op(const char* op);
  std::string expect_name();
  void expect_block_end();
  body parse_body(std::initializer_list<const char*> ends, std::string& end);

  // -- statements (parser_statements.cpp) --
  stmt_ptr parse_statement(const std::string& tag, int line);
  void parse_if(stmt& s);
  void parse_for(stmt& s);
  void parse_set(stmt& s);
  void parse_macro(stmt& s);
  void parse_call_block(stmt& s);
  void parse_filter_block(stmt& s);
  void parse_generation(stmt& s);
  void parse_with(stmt& s);
  std::vector<std::string> parse_targets();
  std::vector<std::pair<std::string, expr_ptr>> parse_params();

  // -- expressions (parser_expressions.cpp) --
  expr_ptr parse_tuple(bool with_cond);
  expr_ptr parse_expression();
  expr_ptr parse_or();
  expr_ptr parse_and();
  expr_ptr parse_not();
  expr_ptr parse_compare();
  expr_ptr binary(const std::string& op, expr_ptr a, expr_ptr b, int line);
  expr_ptr parse_math1();
  expr_ptr parse_concat();
  expr_ptr parse_math2();
  expr_ptr parse_pow();
  expr_ptr parse_unary(bool with_filter);
  expr_ptr parse_primary();
  expr_ptr parse_postfix(expr_ptr e);
  expr_ptr parse_subscript(expr_ptr obj, int line);
  void parse_args(expr& e);
  expr_ptr parse_call(expr_ptr callee);
  expr_ptr parse_filter_expr(expr_ptr e);
  expr_ptr parse_filters(expr_ptr e);
  expr_ptr parse_filter_chain(expr_ptr e);
  expr_ptr parse_one_filter(expr_ptr e);
  expr_ptr parse_test(expr_ptr e);

  std::vector<token> t_;
  size_t i_ = 0;
  int depth_ = 0;  ///< nesting of parse_body / parse_expression / unary operators
};

}  // namespace milesrt::llm::jinja
