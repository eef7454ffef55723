// The parser's statements: one function per tag ({% if %}, {% for %}, {% set %}, {% macro %},
// {% call %}, {% filter %}, {% generation %}, {% with %}, break and continue), each reading the
// tag's header and its body up to the closing tag.
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/parser_impl.hpp"

namespace milesrt::llm::jinja {

stmt_ptr parser::parse_statement(const std::string& tag, int line) {
  auto s = std::make_unique<stmt>();
  s->line = line;
  if (tag == "if") {
    parse_if(*s);
  } else if (tag == "for") {
    parse_for(*s);
  } else if (tag == "set") {
    parse_set(*s);
  } else if (tag == "macro") {
    parse_macro(*s);
  } else if (tag == "call") {
    parse_call_block(*s);
  } else if (tag == "filter") {
    parse_filter_block(*s);
  } else if (tag == "generation") {
    parse_generation(*s);
  } else if (tag == "with") {
    parse_with(*s);
  } else if (tag == "break" || tag == "continue") {
    s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
    expect_block_end();
  } else {
    throw error("tag '{% " + tag + " %}' is not supported", line);
  }
  return s;
}

void parser::parse_if(stmt& s) {
  std::string end;
  s.kind = stmt_kind::if_;
  expr_ptr c = parse_expression();
  while (true) {
    expect_block_end();
    body b = parse_body({"elif", "else", "endif"}, end);
    s.branches.emplace_back(std::move(c), std::move(b));
    if (end == "elif") {
      c = parse_expression();
    } else if (end == "else") {
      expect_block_end();
      body eb = parse_body({"endif"}, end);
      s.branches.emplace_back(nullptr, std::move(eb));
      expect_block_end();
      break;
    } else {
      expect_block_end();
      break;
    }
  }
}

void parser::parse_for(stmt& s) {
  std::string end;
  s.kind = stmt_kind::for_;
  s.targets = parse_targets();
  if (!accept_name("in")) fail("expected 'in' in a for loop, got " + describe(cur()));
  s.value = parse_tuple(false);
  if (accept_name("if")) s.cond = parse_expression();
  if (is_name("recursive")) fail("recursive for loops are not supported");
  expect_block_end();
  s.main = parse_body({"else", "endfor"}, end);
  if (end == "else") {
    expect_block_end();
    s.else_body = parse_body({"endfor"}, end);
  }
  expect_block_end();
}

// {% set a = x %}, {% set a, b = x, y %}, {% set ns.attr = x %} and the block form
// {% set a %}...{% endset %} (optionally filtered: {% set a | f %}).
void parser::parse_set(stmt& s) {
  std::string end;
  std::string first = expect_name();
  if (accept_op(".")) {
    s.kind = stmt_kind::set;
    s.targets = {first};
    s.attr = expect_name();
    expect_op("=");
    s.value = parse_tuple(true);
    expect_block_end();
  } else if (is_op("=") || is_op(",")) {
    s.kind = stmt_kind::set;
    s.targets = {first};
    while (accept_op(",")) s.targets.push_back(expect_name());
    expect_op("=");
    s.value = parse_tuple(true);
    expect_block_end();
  } else {
    s.kind = stmt_kind::set_block;
    s.targets = {first};
    if (is_op("|")) s.value = parse_filters(make_expr(expr_kind::block, s.line));
    expect_block_end();
    s.main = parse_body({"endset"}, end);
    expect_block_end();
  }
}

void parser::parse_macro(stmt& s) {
  std::string end;
  s.kind = stmt_kind::macro;
  s.text = expect_name();
  s.params = parse_params();
  expect_block_end();
  s.main = parse_body({"endmacro"}, end);
  if (cur().kind == token_kind::name) ++i_;  // {% endmacro name %}
  expect_block_end();
}

void parser::parse_call_block(stmt& s) {
  std::string end;
  s.kind = stmt_kind::call_block;
  if (is_op("(")) s.params = parse_params();
  s.value = parse_expression();
  if (s.value->kind != expr_kind::call) fail("{% call %} needs a macro call");
  expect_block_end();
  s.main = parse_body({"endcall"}, end);
  expect_block_end();
}

void parser::parse_filter_block(stmt& s) {
  std::string end;
  s.kind = stmt_kind::filter_block;
  s.value = parse_filter_chain(make_expr(expr_kind::block, s.line));
  expect_block_end();
  s.main = parse_body({"endfilter"}, end);
  expect_block_end();
}

void parser::parse_generation(stmt& s) {
  std::string end;
  s.kind = stmt_kind::generation;
  expect_block_end();
  s.main = parse_body({"endgeneration"}, end);
  expect_block_end();
}

void parser::parse_with(stmt& s) {
  std::string end;
  s.kind = stmt_kind::with_;
  while (cur().kind == token_kind::name) {
    std::string n = expect_name();
    expect_op("=");
    s.params.emplace_back(n, parse_expression());
    if (!accept_op(",")) break;
  }
  expect_block_end();
  s.main = parse_body({"endwith"}, end);
  expect_block_end();
}

std::vector<std::string> parser::parse_targets() {
  std::vector<std::string> out;
  bool paren = accept_op("(");
  out.push_back(expect_name());
  while (accept_op(",")) out.push_back(expect_name());
  if (paren) expect_op(")");
  return out;
}

std::vector<std::pair<std::string, expr_ptr>> parser::parse_params() {
  std::vector<std::pair<std::string, expr_ptr>> out;
  expect_op("(");
  while (!accept_op(")")) {
    std::string n = expect_name();
    expr_ptr def;
    if (accept_op("=")) def = parse_expression();
    out.emplace_back(n, std::move(def));
    if (!accept_op(",")) {
      expect_op(")");
      break;
    }
  }
  return out;
}

}  // namespace milesrt::llm::jinja
