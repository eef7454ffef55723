// The interpreter's statements: text and output, if, for (and `loop`'s items), set, blocks,
// macros' definitions, with, break and continue.
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/interpreter.hpp"
#include "actors/lib/llm/tokenizer/jinja/limits.hpp"

namespace milesrt::llm::jinja {

void interpreter::write(std::string& out, const value& v) {
  if (v.is_string()) {
    out += v.get_ref<const std::string&>();
  } else {
    out += to_str(v);
  }
}

flow interpreter::exec(const body& b) {
  for (const auto& s : b) {
    flow f = exec_located(*s);
    if (f != flow::normal) return f;
  }
  return flow::normal;
}

flow interpreter::exec_located(const stmt& s) {
  try {
    return exec(s);
  } catch (const error& e) {
    if (e.line() > 0) throw;
    throw error(e.what(), s.line);
  } catch (const std::exception& e) {
    throw error(e.what(), s.line);
  }
}

flow interpreter::exec(const stmt& s) {
  switch (s.kind) {
    case stmt_kind::text:
      out += s.text;
      return flow::normal;
    case stmt_kind::output:
      write(out, eval(*s.value).get());
      return flow::normal;
    case stmt_kind::if_:
      for (const auto& [c, b] : s.branches) {
        if (!c || truthy(eval(*c).get())) return exec(b);
      }
      return flow::normal;
    case stmt_kind::for_:
      exec_for(s);
      return flow::normal;
    case stmt_kind::set:
      exec_set(s);
      return flow::normal;
    case stmt_kind::set_block: {
      value v = capture(s.main);
      if (s.value) v = with_block(*s.value, v);
      chain_.back()->vars[s.targets[0]].assign(ref(std::move(v)));
      return flow::normal;
    }
    case stmt_kind::macro:
      chain_.back()->macros[s.text] = &s;
      return flow::normal;
    case stmt_kind::call_block: {
      caller_ctx ctx{&s, chain_, caller_};
      write(out, eval_call(*s.value, &ctx).get());
      return flow::normal;
    }
    case stmt_kind::filter_block:
      write(out, with_block(*s.value, capture(s.main)));
      return flow::normal;
    case stmt_kind::generation:
      return exec(s.main);
    case stmt_kind::with_: {
      frame f;
      for (const auto& [n, e] : s.params) f.vars[n].assign(eval(*e));
      chain_.push_back(&f);
      flow r = exec(s.main);
      chain_.pop_back();
      return r;
    }
    case stmt_kind::break_:
      return flow::break_;
    case stmt_kind::continue_:
      return flow::continue_;
  }
  return flow::normal;
}

std::string interpreter::capture(const body& b) {
  std::string saved = std::move(out);
  out.clear();
  exec(b);
  std::string r = std::move(out);
  out = std::move(saved);
  return r;
}

value interpreter::with_block(const expr& filters, value v) {
  const value* saved = block_value_;
  block_value_ = &v;
  value r = eval(filters).take();
  block_value_ = saved;
  return r;
}

void interpreter::bind(frame& f, const std::vector<std::string>& targets, ref v) {
  if (targets.size() == 1) {
    f.vars[targets[0]].assign(std::move(v));
    return;
  }
  std::vector<value> items = iterate(v.get());
  if (items.size() != targets.size()) {
    throw error("cannot unpack " + std::to_string(items.size()) + " values into " +
                std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < items.size(); ++i) f.vars[targets[i]].assign(ref(std::move(items[i])));
}

// What a for loop visits, as pointers that stay valid (and unassigned) for the loop's body: into
// stable values or a whole variable (which nothing in the body can reassign: `set` there binds
// in the loop's frame), else into `held`, the loop's own copy.
std::vector<const value*> interpreter::loop_items(const expr& e, value& held,
                                                  std::vector<value>& listed) {
  const expr* source = e.kind == expr_kind::slice ? e.object.get() : &e;
  ref r = eval(*source);
  std::vector<const value*> items;
  if (const auto* xs = r.items()) {
    if (e.kind != expr_kind::slice) return *xs;
    for (size_t i : slice_bounds(e, static_cast<int64_t>(xs->size()))) items.push_back((*xs)[i]);
    return items;
  }
  const bool in_place = r.stable() || (r.borrowed() && source->kind == expr_kind::name);
  const value* base = &r.get();
  if (!in_place) {
    held = std::move(r).take();
    base = &held;
  }
  if (e.kind == expr_kind::slice) {
    if (base->is_array()) {
      auto idx = slice_bounds(e, static_cast<int64_t>(base->size()));
      for (size_t i : idx) items.push_back(&(*base)[i]);
      return items;
    }
    // Strings and the rest: slice as an expression does.
    held = eval_slice_of(e, *base);
    base = &held;
  }
  if (base->is_array() || is_generator(*base)) {
    const value& arr = base->is_array() ? *base : base->begin().value();
    items.reserve(arr.size());
    for (const auto& x : arr) items.push_back(&x);
    return items;
  }
  listed = iterate(*base);
  for (const auto& x : listed) items.push_back(&x);
  return items;
}

void interpreter::exec_for(const stmt& s) {
  value held;
  std::vector<value> listed;
  std::vector<const value*> items = loop_items(*s.value, held, listed);
  frame f;
  chain_.push_back(&f);
  if (s.cond) {
    std::vector<const value*> kept;
    for (const value* x : items) {
      bind(f, s.targets, ref(x, true));
      if (truthy(eval(*s.cond).get())) kept.push_back(x);
    }
    items = std::move(kept);
    f.vars.clear();
  }
  loop_state state;
  state.n = items.size();
  state.items = &items;
  f.loop = &state;
  for (size_t i = 0; i < state.n; ++i) {
    limits::count_iteration(iterations_, out.size());
    state.i = i;
    state.made = false;
    bind(f, s.targets, ref(items[i], true));
    if (exec(s.main) == flow::break_) break;
  }
  chain_.pop_back();
  if (state.n == 0) exec(s.else_body);
}

void interpreter::exec_set(const stmt& s) {
  if (!s.attr.empty()) {
    value v = eval(*s.value).take();
    value* ns = lookup_mut(s.targets[0]);
    if (!ns || !ns->is_object())
      throw error("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "'");
    (*ns)[s.attr] = std::move(v);
    return;
  }
  bind(*chain_.back(), s.targets, eval(*s.value));
}

value* interpreter::lookup_mut(const std::string& n) {
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    auto v = (*it)->vars.find(n);
    // A list is no namespace; leave it (and the pointers read from it) alone.
    if (v != (*it)->vars.end()) return v->second.is_list ? nullptr : &v->second.mut();
    if (*it == chain_.front()) {
      if (const value* g = render_var(n))
        return &((*it)->vars[n].own = *g);  // copied on first write
    }
  }
  return nullptr;
}

}  // namespace milesrt::llm::jinja
