#include "actors/lib/llm/tokenizer/jinja/parser.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/lexer.hpp"

namespace milesrt::llm::jinja {
namespace {

expr_ptr make(expr_kind k, int line) {
  auto e = std::make_unique<expr>();
  e->kind = k;
  e->line = line;
  return e;
}

// The deepest nesting a template may have: brackets, operators, filters and tags within one
// another (as transformers, whose Jinja parser and renderer recurse in Python, have a bound).
constexpr int max_nesting = 100;

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

  // `s`, once its expressions are known to be no deeper than max_nesting.
  stmt_ptr checked(stmt_ptr s) {
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
  std::string describe(const token& t) const {
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
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != token_kind::name) fail("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != token_kind::block_end)
      fail("expected end of tag '%}', got " + describe(cur()));
    ++i_;
  }

  // Statements up to one of `ends` (a tag name); `end` receives the tag found (its block_begin
  // and name consumed).
  body parse_body(std::initializer_list<const char*> ends, std::string& end) {
    nested guard(*this);
    body out;
    while (true) {
      const token& t = cur();
      if (t.kind == token_kind::eof) {
        if (ends.size() == 0) return out;
        std::string want;
        for (const char* e : ends)
          want += (want.empty() ? "" : " or ") + std::string("'") + e + "'";
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

  stmt_ptr parse_statement(const std::string& tag, int line) {
    auto s = std::make_unique<stmt>();
    s->line = line;
    std::string end;
    if (tag == "if") {
      s->kind = stmt_kind::if_;
      expr_ptr c = parse_expression();
      while (true) {
        expect_block_end();
        body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(c), std::move(b));
        if (end == "elif") {
          c = parse_expression();
        } else if (end == "else") {
          expect_block_end();
          body eb = parse_body({"endif"}, end);
          s->branches.emplace_back(nullptr, std::move(eb));
          expect_block_end();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (tag == "for") {
      s->kind = stmt_kind::for_;
      s->targets = parse_targets();
      if (!accept_name("in")) fail("expected 'in' in a for loop, got " + describe(cur()));
      s->value = parse_tuple(false);
      if (accept_name("if")) s->cond = parse_expression();
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->main = parse_body({"else", "endfor"}, end);
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      expect_block_end();
    } else if (tag == "set") {
      std::string first = expect_name();
      if (accept_op(".")) {
        s->kind = stmt_kind::set;
        s->targets = {first};
        s->attr = expect_name();
        expect_op("=");
        s->value = parse_tuple(true);
        expect_block_end();
      } else if (is_op("=") || is_op(",")) {
        s->kind = stmt_kind::set;
        s->targets = {first};
        while (accept_op(",")) s->targets.push_back(expect_name());
        expect_op("=");
        s->value = parse_tuple(true);
        expect_block_end();
      } else {
        s->kind = stmt_kind::set_block;
        s->targets = {first};
        if (is_op("|")) s->value = parse_filters(make(expr_kind::block, line));
        expect_block_end();
        s->main = parse_body({"endset"}, end);
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = stmt_kind::macro;
      s->text = expect_name();
      s->params = parse_params();
      expect_block_end();
      s->main = parse_body({"endmacro"}, end);
      if (cur().kind == token_kind::name) ++i_;  // {% endmacro name %}
      expect_block_end();
    } else if (tag == "call") {
      s->kind = stmt_kind::call_block;
      if (is_op("(")) s->params = parse_params();
      s->value = parse_expression();
      if (s->value->kind != expr_kind::call) fail("{% call %} needs a macro call");
      expect_block_end();
      s->main = parse_body({"endcall"}, end);
      expect_block_end();
    } else if (tag == "filter") {
      s->kind = stmt_kind::filter_block;
      s->value = parse_filter_chain(make(expr_kind::block, line));
      expect_block_end();
      s->main = parse_body({"endfilter"}, end);
      expect_block_end();
    } else if (tag == "generation") {
      s->kind = stmt_kind::generation;
      expect_block_end();
      s->main = parse_body({"endgeneration"}, end);
      expect_block_end();
    } else if (tag == "with") {
      s->kind = stmt_kind::with_;
      while (cur().kind == token_kind::name) {
        std::string n = expect_name();
        expect_op("=");
        s->params.emplace_back(n, parse_expression());
        if (!accept_op(",")) break;
      }
      expect_block_end();
      s->main = parse_body({"endwith"}, end);
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
      expect_block_end();
    } else {
      throw error("tag '{% " + tag + " %}' is not supported", line);
    }
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> out;
    bool paren = accept_op("(");
    out.push_back(expect_name());
    while (accept_op(",")) out.push_back(expect_name());
    if (paren) expect_op(")");
    return out;
  }

  std::vector<std::pair<std::string, expr_ptr>> parse_params() {
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

  // An expression, or an unparenthesised tuple of them (`set a, b = 1, 2`, `for x in a, b`).
  expr_ptr parse_tuple(bool with_cond) {
    int line = cur().line;
    expr_ptr e = with_cond ? parse_expression() : parse_or();
    if (!is_op(",")) return e;
    auto t = make(expr_kind::list, line);
    t->args.push_back(std::move(e));
    while (accept_op(",")) {
      if (cur().kind == token_kind::block_end) break;
      t->args.push_back(with_cond ? parse_expression() : parse_or());
    }
    return t;
  }

  expr_ptr parse_expression() {
    nested guard(*this);
    expr_ptr e = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto c = make(expr_kind::cond, line);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      c->args.push_back(accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  expr_ptr parse_or() {
    expr_ptr e = parse_and();
    while (is_name("or")) {
      auto b = make(expr_kind::logical, next().line);
      b->name = "or";
      b->args.push_back(std::move(e));
      b->args.push_back(parse_and());
      e = std::move(b);
    }
    return e;
  }

  expr_ptr parse_and() {
    expr_ptr e = parse_not();
    while (is_name("and")) {
      auto b = make(expr_kind::logical, next().line);
      b->name = "and";
      b->args.push_back(std::move(e));
      b->args.push_back(parse_not());
      e = std::move(b);
    }
    return e;
  }

  expr_ptr parse_not() {
    if (is_name("not")) {
      nested guard(*this);
      auto u = make(expr_kind::unary, next().line);
      u->name = "not";
      u->object = parse_not();
      return u;
    }
    return parse_compare();
  }

  expr_ptr parse_compare() {
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
        c = make(expr_kind::compare, line);
        c->args.push_back(std::move(e));
      }
      c->ops.push_back(op);
      c->args.push_back(parse_math1());
    }
    return c ? std::move(c) : std::move(e);
  }

  expr_ptr binary(const std::string& op, expr_ptr a, expr_ptr b, int line) {
    auto e = make(expr_kind::binary, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  expr_ptr parse_math1() {
    expr_ptr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      token t = next();
      e = binary(t.text, std::move(e), parse_concat(), t.line);
    }
    return e;
  }

  expr_ptr parse_concat() {
    expr_ptr e = parse_math2();
    while (is_op("~")) {
      token t = next();
      e = binary("~", std::move(e), parse_math2(), t.line);
    }
    return e;
  }

  expr_ptr parse_math2() {
    expr_ptr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      token t = next();
      e = binary(t.text, std::move(e), parse_pow(), t.line);
    }
    return e;
  }

  expr_ptr parse_pow() {
    expr_ptr e = parse_unary(true);
    while (is_op("**")) {
      token t = next();
      e = binary("**", std::move(e), parse_unary(true), t.line);
    }
    return e;
  }

  expr_ptr parse_unary(bool with_filter) {
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      nested guard(*this);
      token t = next();
      e = make(expr_kind::unary, t.line);
      e->name = t.text;
      e->object = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  expr_ptr parse_primary() {
    const token& t = cur();
    int line = t.line;
    if (t.kind == token_kind::name) {
      std::string n = next().text;
      auto e = make(expr_kind::literal, line);
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
      auto e = make(expr_kind::literal, line);
      e->lit = s;
      return e;
    }
    if (t.kind == token_kind::integer || t.kind == token_kind::floating) {
      auto e = make(expr_kind::literal, line);
      std::string s = next().text;
      if (t.kind == token_kind::integer) {
        e->lit = static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10));
      } else {
        e->lit = std::strtod(s.c_str(), nullptr);
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return make(expr_kind::list, line);
      expr_ptr e = parse_expression();
      if (is_op(",")) {
        auto tup = make(expr_kind::list, line);
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
      auto e = make(expr_kind::list, line);
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
      auto e = make(expr_kind::dict, line);
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

  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      int line = cur().line;
      if (accept_op(".")) {
        if (cur().kind == token_kind::integer) {
          auto ix = make(expr_kind::index, line);
          ix->object = std::move(e);
          auto lit = make(expr_kind::literal, line);
          lit->lit = static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10));
          ix->args.push_back(std::move(lit));
          e = std::move(ix);
        } else {
          auto a = make(expr_kind::attr, line);
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

  expr_ptr parse_subscript(expr_ptr obj, int line) {
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
    auto e = make(is_slice ? expr_kind::slice : expr_kind::index, line);
    e->object = std::move(obj);
    if (is_slice) {
      for (auto& p : parts) e->args.push_back(std::move(p));
    } else {
      if (!parts[0]) fail("empty subscript");
      e->args.push_back(std::move(parts[0]));
    }
    return e;
  }

  void parse_args(expr& e) {
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

  expr_ptr parse_call(expr_ptr callee) {
    auto e = make(expr_kind::call, cur().line);
    e->object = std::move(callee);
    parse_args(*e);
    return e;
  }

  expr_ptr parse_filter_expr(expr_ptr e) {
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

  expr_ptr parse_filters(expr_ptr e) {
    while (accept_op("|")) e = parse_one_filter(std::move(e));
    return e;
  }

  // {% filter a|b(c) %}: the first filter has no leading '|'.
  expr_ptr parse_filter_chain(expr_ptr e) {
    e = parse_one_filter(std::move(e));
    return parse_filters(std::move(e));
  }

  expr_ptr parse_one_filter(expr_ptr e) {
    auto f = make(expr_kind::filter, cur().line);
    f->name = expect_name();
    while (accept_op(".")) f->name += "." + expect_name();
    f->object = std::move(e);
    if (is_op("(")) parse_args(*f);
    return f;
  }

  expr_ptr parse_test(expr_ptr e) {
    auto t = make(expr_kind::test, next().line);
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

  std::vector<token> t_;
  size_t i_ = 0;
  int depth_ = 0;  ///< nesting of parse_body / parse_expression / unary operators
};

}  // namespace

body parse(std::string_view source) { return parser(lex(source)).run(); }

}  // namespace milesrt::llm::jinja
