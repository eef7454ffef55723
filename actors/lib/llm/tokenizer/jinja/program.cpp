#include "actors/lib/llm/tokenizer/jinja/program.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/interpreter.hpp"
#include "actors/lib/llm/tokenizer/jinja/parser.hpp"

namespace milesrt::llm::jinja {
namespace {

// Marks the expressions that may run template code (expr::may_run_code).
bool mark(expr* e) {
  if (!e) return false;
  bool r = e->kind == expr_kind::call && e->object && e->object->kind == expr_kind::name;
  r = mark(e->object.get()) || r;
  for (auto& x : e->args) r = mark(x.get()) || r;
  for (auto& kv : e->kwargs) r = mark(kv.second.get()) || r;
  e->may_run_code = r;
  return r;
}

void mark(body& b) {
  for (auto& s : b) {
    mark(s->value.get());
    mark(s->cond.get());
    for (auto& [c, sub] : s->branches) {
      mark(c.get());
      mark(sub);
    }
    for (auto& kv : s->params) mark(kv.second.get());
    mark(s->main);
    mark(s->else_body);
  }
}

}  // namespace

std::shared_ptr<const program> program::parse(std::string_view source) {
  auto p = std::shared_ptr<program>(new program());
  p->body_ = jinja::parse(source);
  mark(p->body_);
  return p;
}

std::string program::render(const value& variables, const environment& env) const {
  return render(variables, {}, env);
}

std::string program::render(const value& variables,
                            const std::vector<std::pair<std::string_view, const value*>>& borrowed,
                            const environment& env) const {
  if (!variables.is_object()) throw error("template variables must be an object");
  frame globals;
  interpreter in(globals, variables, borrowed, env);
  in.exec(body_);
  return std::move(in.out);
}

}  // namespace milesrt::llm::jinja
