// The interpreter's calls: macros, {% call %} blocks and caller(), methods of values, and the
// global functions (raise_exception, strftime_now, range, namespace, dict).
#include <cmath>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/interpreter.hpp"
#include "actors/lib/llm/tokenizer/jinja/limits.hpp"

namespace milesrt::llm::jinja {

using namespace std::string_view_literals;

ref interpreter::eval_call(const expr& e, const caller_ctx* with_caller) {
  const expr& callee = *e.object;
  if (callee.kind == expr_kind::name) {
    if (const stmt* m = lookup_macro(callee.name))
      return ref(value(call_macro(*m, eval_args(e), with_caller)));
    if (with_caller) throw error("{% call %} of '" + callee.name + "', which is not a macro");
    return ref(call_global(callee.name, eval_args(e)));
  }
  if (with_caller) throw error("{% call %} needs a macro call");
  if (callee.kind == expr_kind::attr) {
    ref obj = eval(*callee.object);
    if (is_undefined(obj.get())) {
      throw error("'" + describe(*callee.object) + "' is undefined (calling ." + callee.name +
                  "())");
    }
    if (args_run_code(e)) obj.pin();
    return ref(call_method(obj.get(), callee.name, eval_args(e)));
  }
  throw error("calling " + describe(callee) + " is not supported");
}

call_args interpreter::eval_args(const expr& e) {
  call_args a;
  a.pos.reserve(e.args.size());
  for (const auto& x : e.args) a.pos.push_back(eval(*x).take());
  for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x).take());
  return a;
}

// Whether evaluating the arguments of `e` may run template code.
bool interpreter::args_run_code(const expr& e) {
  for (const auto& x : e.args) {
    if (x && x->may_run_code) return true;
  }
  for (const auto& kv : e.kwargs) {
    if (kv.second->may_run_code) return true;
  }
  return false;
}

const stmt* interpreter::lookup_macro(const std::string& n) const {
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    if (find_var(**it, n)) return nullptr;
    auto m = (*it)->macros.find(n);
    if (m != (*it)->macros.end()) return m->second;
  }
  return nullptr;
}

value interpreter::call_global(const std::string& n, const call_args& a) {
  if (n == "raise_exception"sv) {
    throw error(a.pos.empty() ? std::string("raise_exception") : to_str(a.pos[0]));
  }
  if (n == "strftime_now"sv) {
    if (a.pos.empty() || !a.pos[0].is_string())
      throw error("strftime_now(format) needs a format string");
    std::tm tm{};
    if (env_.now) {
      tm = *env_.now;
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    char buf[256];
    size_t len =
        std::strftime(buf, sizeof buf, a.pos[0].get_ref<const std::string&>().c_str(), &tm);
    return std::string(buf, len);
  }
  if (n == "range"sv) {
    if (a.pos.empty() || a.pos.size() > 3) throw error("range() takes 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = as_int(a.pos[0]);
    } else {
      start = as_int(a.pos[0]);
      stop = as_int(a.pos[1]);
      if (a.pos.size() == 3) step = as_int(a.pos[2]);
    }
    if (step == 0) throw error("range() arg 3 must not be zero");
    const double items = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                   static_cast<double>(step));
    if (items > static_cast<double>(limits::max_range)) {
      throw error("range() of " + std::to_string(static_cast<int64_t>(items)) +
                  " items: the limit is " + std::to_string(limits::max_range));
    }
    value r = value::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) r.push_back(i);
    return r;
  }
  if (n == "namespace"sv || n == "dict"sv) {
    value r = value::object();
    for (const auto& p : a.pos) {
      if (!p.is_object()) throw error(n + "() takes keyword arguments or a dict");
      for (auto it = p.begin(); it != p.end(); ++it) r[it.key()] = it.value();
    }
    for (const auto& [k, v] : a.kw) r[k] = v;
    return r;
  }
  if (n == "caller"sv && caller_) return call_caller(a);
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    if (find_var(**it, n)) throw error("'" + n + "' is not callable");
  }
  throw error("'" + n + "' is undefined (called as a function)");
}

std::string interpreter::call_macro(const stmt& m, const call_args& a,
                                    const caller_ctx* with_caller) {
  if (a.pos.size() > m.params.size()) {
    throw error("macro '" + m.text + "' takes " + std::to_string(m.params.size()) +
                " arguments, got " + std::to_string(a.pos.size()));
  }
  limits::call_depth guard(depth_, "macro '" + m.text + "'");
  frame f;
  std::vector<frame*> saved = chain_;
  chain_ = {chain_.front(), &f};
  for (size_t i = 0; i < m.params.size(); ++i) {
    const auto& [name, def] = m.params[i];
    const value* given = a.get(i, name.c_str());
    f.vars[name].assign(ref(given ? *given : def ? eval(*def).take() : undefined()));
  }
  for (const auto& [k, v] : a.kw) {
    bool known = false;
    for (const auto& p : m.params) known = known || p.first == k;
    if (!known) throw error("macro '" + m.text + "' has no parameter '" + k + "'");
  }
  const caller_ctx* saved_caller = caller_;
  caller_ = with_caller;
  std::string r;
  try {
    r = capture(m.main);
  } catch (...) {
    chain_ = std::move(saved);
    caller_ = saved_caller;
    throw;
  }
  chain_ = std::move(saved);
  caller_ = saved_caller;
  return r;
}

value interpreter::call_caller(const call_args& a) {
  const caller_ctx* ctx = caller_;
  limits::call_depth guard(depth_, "caller()");
  frame f;
  for (size_t i = 0; i < ctx->block->params.size(); ++i) {
    const auto& [name, def] = ctx->block->params[i];
    const value* given = a.get(i, name.c_str());
    f.vars[name].assign(ref(given ? *given : def ? eval(*def).take() : undefined()));
  }
  std::vector<frame*> saved = chain_;
  chain_ = ctx->chain;
  chain_.push_back(&f);
  caller_ = ctx->outer;
  std::string r;
  try {
    r = capture(ctx->block->main);
  } catch (...) {
    chain_ = std::move(saved);
    caller_ = ctx;
    throw;
  }
  chain_ = std::move(saved);
  caller_ = ctx;
  return r;
}

}  // namespace milesrt::llm::jinja
