#include "actors/lib/llm/tokenizer/jinja/parser.hpp"

#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/parser_impl.hpp"

namespace milesrt::llm::jinja {
namespace {

// The height of an expression tree, walked without recursion: `a + b + c + ...` chains build
// trees as deep as they are long.
int height(const expr& root) {
  int best = 0;
  std::vector<std::pair<const expr*, int>> todo{{&root, 1}};
  while (!todo.empty()) {
    auto [e, h] = todo.back();
    todo.pop_back();
    best = std::max(best, h);
    if (h > max_nesting) return h;
    if (e->object) todo.emplace_back(e->object.get(), h + 1);
    for (const auto& a : e->args) {
      if (a) todo.emplace_back(a.get(), h + 1);
    }
    for (const auto& kv : e->kwargs) {
      if (kv.second) todo.emplace_back(kv.second.get(), h + 1);
    }
  }
  return best;
}

// Frees an expression tree without recursion (the destructors of a deep one would overflow the
// stack).
void dismantle(expr_ptr root) {
  std::vector<expr_ptr> todo;
  todo.push_back(std::move(root));
  while (!todo.empty()) {
    expr_ptr e = std::move(todo.back());
    todo.pop_back();
    if (!e) continue;
    todo.push_back(std::move(e->object));
    for (auto& a : e->args) todo.push_back(std::move(a));
    for (auto& kv : e->kwargs) todo.push_back(std::move(kv.second));
  }
}

}  // namespace

// `s`, once its expressions are known to be no deeper than max_nesting.
stmt_ptr parser::checked(stmt_ptr s) {
  std::vector<expr_ptr*> exprs{&s->value, &s->cond};
  for (auto& b : s->branches) exprs.push_back(&b.first);
  for (auto& p : s->params) exprs.push_back(&p.second);
  for (expr_ptr* e : exprs) {
    if (*e && height(**e) > max_nesting) {
      const int line = s->line;
      for (expr_ptr* x : exprs) dismantle(std::move(*x));
      throw error("an expression nested deeper than " + std::to_string(max_nesting) +
                      " levels (operators, brackets or filters)",
                  line);
    }
  }
  return s;
}

std::string parser::describe(const token& t) const {
  switch (t.kind) {
    case token_kind::block_end:
      return "end of tag '%}'";
    case token_kind::var_end:
      return "end of output '}}'";
    case token_kind::eof:
      return "end of template";
    case token_kind::string:
      return "string literal";
    default:
      return "'" + t.text + "'";
  }
}

void parser::expect_op(const char* op) {
  if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
}

std::string parser::expect_name() {
  if (cur().kind != token_kind::name) fail("expected a name, got " + describe(cur()));
  return next().text;
}

void parser::expect_block_end() {
  if (cur().kind != token_kind::block_end) fail("expected end of tag '%}', got " + describe(cur()));
  ++i_;
}

// Statements up to one of `ends` (a tag name); `end` receives the tag found (its block_begin
// and name consumed).
body parser::parse_body(std::initializer_list<const char*> ends, std::string& end) {
  nested guard(*this);
  body out;
  while (true) {
    const token& t = cur();
    if (t.kind == token_kind::eof) {
      if (ends.size() == 0) return out;
      std::string want;
      for (const char* e : ends) want += (want.empty() ? "" : " or ") + std::string("'") + e + "'";
      fail("unexpected end of template: expected " + want);
    }
    if (t.kind == token_kind::text) {
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::text;
      s->line = t.line;
      s->text = t.text;
      out.push_back(std::move(s));
      ++i_;
    } else if (t.kind == token_kind::var_begin) {
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::output;
      s->line = t.line;
      ++i_;
      s->value = parse_expression();
      if (cur().kind != token_kind::var_end)
        fail("expected end of output '}}', got " + describe(cur()));
      ++i_;
      out.push_back(checked(std::move(s)));
    } else if (t.kind == token_kind::block_begin) {
      const token& n = peek();
      if (n.kind != token_kind::name) throw error("expected a tag name after '{%'", n.line);
      for (const char* e : ends) {
        if (n.text == e) {
          i_ += 2;
          end = e;
          return out;
        }
      }
      i_ += 2;
      out.push_back(checked(parse_statement(n.text, n.line)));
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

body parse(std::string_view source) { return parser(lex(source)).run(); }

}  // namespace milesrt::llm::jinja
