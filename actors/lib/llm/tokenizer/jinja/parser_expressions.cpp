// The parser's expressions, from the loosest binding (conditional expressions, or, and, not,
// comparisons) to the tightest (arithmetic, unary operators, filters and tests, postfix
// attributes, subscripts and calls, literals).
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/parser_impl.hpp"

namespace milesrt::llm::jinja {

// An expression, or an unparenthesised tuple of them (`set a, b = 1, 2`, `for x in a, b`).
expr_ptr parser::parse_tuple(bool with_cond) {
  int line = cur().line;
  expr_ptr e = with_cond ? parse_expression() : parse_or();
  if (!is_op(",")) return e;
  auto t = make_expr(expr_kind::list, line);
  t->args.push_back(std::move(e));
  while (accept_op(",")) {
    if (cur().kind == token_kind::block_end) break;
    t->args.push_back(with_cond ? parse_expression() : parse_or());
  }
  return t;
}

expr_ptr parser::parse_expression() {
  nested guard(*this);
  expr_ptr e = parse_or();
  while (is_name("if")) {
    int line = next().line;
    auto c = make_expr(expr_kind::cond, line);
    c->args.push_back(std::move(e));
    c->args.push_back(parse_or());
    c->args.push_back(accept_name("else") ? parse_expression() : nullptr);
    e = std::move(c);
  }
  return e;
}

expr_ptr parser::parse_or() {
  expr_ptr e = parse_and();
  while (is_name("or")) {
    auto b = make_expr(expr_kind::logical, next().line);
    b->name = "or";
    b->args.push_back(std::move(e));
    b->args.push_back(parse_and());
    e = std::move(b);
  }
  return e;
}

expr_ptr parser::parse_and() {
  expr_ptr e = parse_not();
  while (is_name("and")) {
    auto b = make_expr(expr_kind::logical, next().line);
    b->name = "and";
    b->args.push_back(std::move(e));
    b->args.push_back(parse_not());
    e = std::move(b);
  }
  return e;
}

expr_ptr parser::parse_not() {
  if (is_name("not")) {
    nested guard(*this);
    auto u = make_expr(expr_kind::unary, next().line);
    u->name = "not";
    u->object = parse_not();
    return u;
  }
  return parse_compare();
}

expr_ptr parser::parse_compare() {
  int line = cur().line;
  expr_ptr e = parse_math1();
  expr_ptr c;
  while (true) {
    std::string op;
    if (cur().kind == token_kind::op &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      ++i_;
      op = "in";
    } else if (is_name("not") && peek().kind == token_kind::name && peek().text == "in") {
      i_ += 2;
      op = "not in";
    } else {
      break;
    }
    if (!c) {
      c = make_expr(expr_kind::compare, line);
      c->args.push_back(std::move(e));
    }
    c->ops.push_back(op);
    c->args.push_back(parse_math1());
  }
  return c ? std::move(c) : std::move(e);
}

expr_ptr parser::binary(const std::string& op, expr_ptr a, expr_ptr b, int line) {
  auto e = make_expr(expr_kind::binary, line);
  e->name = op;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

expr_ptr parser::parse_math1() {
  expr_ptr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    token t = next();
    e = binary(t.text, std::move(e), parse_concat(), t.line);
  }
  return e;
}

expr_ptr parser::parse_concat() {
  expr_ptr e = parse_math2();
  while (is_op("~")) {
    token t = next();
    e = binary("~", std::move(e), parse_math2(), t.line);
  }
  return e;
}

expr_ptr parser::parse_math2() {
  expr_ptr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    token t = next();
    e = binary(t.text, std::move(e), parse_pow(), t.line);
  }
  return e;
}

expr_ptr parser::parse_pow() {
  expr_ptr e = parse_unary(true);
  while (is_op("**")) {
    token t = next();
    e = binary("**", std::move(e), parse_unary(true), t.line);
  }
  return e;
}

expr_ptr parser::parse_unary(bool with_filter) {
  expr_ptr e;
  if (is_op("-") || is_op("+")) {
    nested guard(*this);
    token t = next();
    e = make_expr(expr_kind::unary, t.line);
    e->name = t.text;
    e->object = parse_unary(false);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

expr_ptr parser::parse_primary() {
  const token& t = cur();
  int line = t.line;
  if (t.kind == token_kind::name) {
    std::string n = next().text;
    auto e = make_expr(expr_kind::literal, line);
    if (n == "true" || n == "True") {
      e->lit = true;
    } else if (n == "false" || n == "False") {
      e->lit = false;
    } else if (n == "none" || n == "None") {
      e->lit = nullptr;
    } else {
      e->kind = expr_kind::name;
      e->name = n;
    }
    return e;
  }
  if (t.kind == token_kind::string) {
    std::string s;
    while (cur().kind == token_kind::string) s += next().text;
    auto e = make_expr(expr_kind::literal, line);
    e->lit = s;
    return e;
  }
  if (t.kind == token_kind::integer || t.kind == token_kind::floating) {
    auto e = make_expr(expr_kind::literal, line);
    std::string s = next().text;
    if (t.kind == token_kind::integer) {
      e->lit = static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10));
    } else {
      e->lit = std::strtod(s.c_str(), nullptr);
    }
    return e;
  }
  if (accept_op("(")) {
    if (accept_op(")")) return make_expr(expr_kind::list, line);
    expr_ptr e = parse_expression();
    if (is_op(",")) {
      auto tup = make_expr(expr_kind::list, line);
      tup->args.push_back(std::move(e));
      while (accept_op(",")) {
        if (is_op(")")) break;
        tup->args.push_back(parse_expression());
      }
      e = std::move(tup);
    }
    expect_op(")");
    return e;
  }
  if (accept_op("[")) {
    auto e = make_expr(expr_kind::list, line);
    while (!accept_op("]")) {
      e->args.push_back(parse_expression());
      if (!accept_op(",")) {
        expect_op("]");
        break;
      }
    }
    return e;
  }
  if (accept_op("{")) {
    auto e = make_expr(expr_kind::dict, line);
    while (!accept_op("}")) {
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
      if (!accept_op(",")) {
        expect_op("}");
        break;
      }
    }
    return e;
  }
  fail("unexpected " + describe(t) + " in an expression");
}

expr_ptr parser::parse_postfix(expr_ptr e) {
  while (true) {
    int line = cur().line;
    if (accept_op(".")) {
      if (cur().kind == token_kind::integer) {
        auto ix = make_expr(expr_kind::index, line);
        ix->object = std::move(e);
        auto lit = make_expr(expr_kind::literal, line);
        lit->lit = static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10));
        ix->args.push_back(std::move(lit));
        e = std::move(ix);
      } else {
        auto a = make_expr(expr_kind::attr, line);
        a->object = std::move(e);
        a->name = expect_name();
        e = std::move(a);
      }
    } else if (accept_op("[")) {
      e = parse_subscript(std::move(e), line);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

expr_ptr parser::parse_subscript(expr_ptr obj, int line) {
  expr_ptr parts[3];
  int n = 0;
  bool is_slice = false;
  while (true) {
    if (is_op(":")) {
      is_slice = true;
      ++i_;
      if (++n > 2) fail("too many ':' in a slice");
      continue;
    }
    if (is_op("]")) break;
    if (parts[n]) fail("expected ']' or ':' in a subscript");
    parts[n] = parse_expression();
  }
  expect_op("]");
  auto e = make_expr(is_slice ? expr_kind::slice : expr_kind::index, line);
  e->object = std::move(obj);
  if (is_slice) {
    for (auto& p : parts) e->args.push_back(std::move(p));
  } else {
    if (!parts[0]) fail("empty subscript");
    e->args.push_back(std::move(parts[0]));
  }
  return e;
}

void parser::parse_args(expr& e) {
  expect_op("(");
  while (!accept_op(")")) {
    if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
    if (cur().kind == token_kind::name && peek().kind == token_kind::op && peek().text == "=") {
      std::string n = next().text;
      ++i_;
      e.kwargs.emplace_back(n, parse_expression());
    } else {
      if (!e.kwargs.empty()) fail("a positional argument follows keyword arguments");
      e.args.push_back(parse_expression());
    }
    if (!accept_op(",")) {
      expect_op(")");
      break;
    }
  }
}

expr_ptr parser::parse_call(expr_ptr callee) {
  auto e = make_expr(expr_kind::call, cur().line);
  e->object = std::move(callee);
  parse_args(*e);
  return e;
}

expr_ptr parser::parse_filter_expr(expr_ptr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filters(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

expr_ptr parser::parse_filters(expr_ptr e) {
  while (accept_op("|")) e = parse_one_filter(std::move(e));
  return e;
}

// {% filter a|b(c) %}: the first filter has no leading '|'.
expr_ptr parser::parse_filter_chain(expr_ptr e) {
  e = parse_one_filter(std::move(e));
  return parse_filters(std::move(e));
}

expr_ptr parser::parse_one_filter(expr_ptr e) {
  auto f = make_expr(expr_kind::filter, cur().line);
  f->name = expect_name();
  while (accept_op(".")) f->name += "." + expect_name();
  f->object = std::move(e);
  if (is_op("(")) parse_args(*f);
  return f;
}

expr_ptr parser::parse_test(expr_ptr e) {
  auto t = make_expr(expr_kind::test, next().line);
  t->negated = accept_name("not");
  t->name = expect_name();
  t->object = std::move(e);
  if (is_op("(")) {
    parse_args(*t);
  } else {
    const token& c = cur();
    bool arg = c.kind == token_kind::name || c.kind == token_kind::string ||
               c.kind == token_kind::integer || c.kind == token_kind::floating || is_op("(") ||
               is_op("[") || is_op("{");
    if (arg && !(is_name("else") || is_name("or") || is_name("and"))) {
      t->args.push_back(parse_postfix(parse_primary()));
    }
  }
  return t;
}

}  // namespace milesrt::llm::jinja
