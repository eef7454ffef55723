#include "actors/lib/llm/tokenizer/jinja/program.hpp"

#include <cctype>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/limits.hpp"
#include "actors/lib/llm/tokenizer/jinja/parser.hpp"
#include "actors/lib/llm/tokenizer/jinja/ref.hpp"

namespace milesrt::llm::jinja {
namespace {

using namespace std::string_view_literals;

// A for loop's `loop`, answered field by field; the object is built only when the template uses
// `loop` as a whole.
struct loop_state {
  size_t i = 0, n = 0;
  const std::vector<const value*>* items = nullptr;
  value object;
  bool made = false;
};

struct frame {
  std::unordered_map<std::string, slot> vars;
  std::unordered_map<std::string, const stmt*> macros;
  loop_state* loop = nullptr;
};

struct caller_ctx {
  const stmt* block;
  std::vector<frame*> chain;
  const caller_ctx* outer;
};

enum class flow { normal, break_, continue_ };

// Python's slice.indices(len) and the indices it selects.
std::vector<size_t> slice_indices(int64_t n, const value* start, const value* stop,
                                  const value* step) {
  int64_t st = step ? as_int(*step) : 1;
  if (st == 0) throw error("slice step cannot be zero");
  auto clamp = [&](const value* v, int64_t def, bool is_start) {
    if (!v) return def;
    int64_t x = as_int(*v);
    if (x < 0) x += n;
    if (st > 0) return std::max<int64_t>(0, std::min(x, n));
    (void)is_start;
    return std::max<int64_t>(-1, std::min(x, n - 1));
  };
  int64_t a = clamp(start, st > 0 ? 0 : n - 1, true);
  int64_t b = clamp(stop, st > 0 ? n : -1, false);
  std::vector<size_t> out;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) out.push_back(static_cast<size_t>(i));
  return out;
}

std::string describe(const expr& e) {
  if (e.kind == expr_kind::name) return e.name;
  if (e.kind == expr_kind::attr) return describe(*e.object) + "." + e.name;
  if (e.kind == expr_kind::index) return describe(*e.object) + "[...]";
  if (e.kind == expr_kind::call) return describe(*e.object) + "(...)";
  return "value";
}

// Appends what `{{ v }}` writes.
void write(std::string& out, const value& v) {
  if (v.is_string()) {
    out += v.get_ref<const std::string&>();
  } else {
    out += to_str(v);
  }
}

// A name and the value it stands for in place of the render's `variables` (see program::render).
using borrowed_vars = std::vector<std::pair<std::string_view, const value*>>;

class interpreter {
 public:
  // `variables` (and `borrowed`, which win) are read in place (no copy per render); the globals
  // frame shadows them once the template sets or mutates one of those names.
  interpreter(frame& globals, const value& variables, const borrowed_vars& borrowed,
              const environment& env)
      : variables_(variables), borrowed_(borrowed), env_(env) {
    chain_.push_back(&globals);
  }

  std::string out;

  flow exec(const body& b) {
    for (const auto& s : b) {
      flow f = exec_located(*s);
      if (f != flow::normal) return f;
    }
    return flow::normal;
  }

 private:
  flow exec_located(const stmt& s) {
    try {
      return exec(s);
    } catch (const error& e) {
      if (e.line() > 0) throw;
      throw error(e.what(), s.line);
    } catch (const std::exception& e) {
      throw error(e.what(), s.line);
    }
  }

  flow exec(const stmt& s) {
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

  std::string capture(const body& b) {
    std::string saved = std::move(out);
    out.clear();
    exec(b);
    std::string r = std::move(out);
    out = std::move(saved);
    return r;
  }

  value with_block(const expr& filters, value v) {
    const value* saved = block_value_;
    block_value_ = &v;
    value r = eval(filters).take();
    block_value_ = saved;
    return r;
  }

  void bind(frame& f, const std::vector<std::string>& targets, ref v) {
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
  std::vector<const value*> loop_items(const expr& e, value& held, std::vector<value>& listed) {
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

  void exec_for(const stmt& s) {
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

  // `loop.<name>` of `st`; nullopt for names that need the object.
  static std::optional<ref> loop_field(const loop_state& st, const std::string& name) {
    const size_t i = st.i, n = st.n;
    if (name == "index0"sv) return ref(value(i));
    if (name == "index"sv) return ref(value(i + 1));
    if (name == "first"sv) return ref(value(i == 0));
    if (name == "last"sv) return ref(value(i + 1 == n));
    if (name == "length"sv) return ref(value(n));
    if (name == "revindex"sv) return ref(value(n - i));
    if (name == "revindex0"sv) return ref(value(n - i - 1));
    if (name == "depth"sv) return ref(value(1));
    if (name == "depth0"sv) return ref(value(0));
    if (name == "previtem"sv) return i > 0 ? ref((*st.items)[i - 1], true) : ref(undefined());
    if (name == "nextitem"sv) return i + 1 < n ? ref((*st.items)[i + 1], true) : ref(undefined());
    return std::nullopt;
  }

  static const value& loop_object(loop_state& st) {
    if (!st.made) {
      const size_t i = st.i, n = st.n;
      value loop = value::object();
      loop["index"] = i + 1;
      loop["index0"] = i;
      loop["revindex"] = n - i;
      loop["revindex0"] = n - i - 1;
      loop["first"] = i == 0;
      loop["last"] = i + 1 == n;
      loop["length"] = n;
      loop["depth"] = 1;
      loop["depth0"] = 0;
      if (i > 0) loop["previtem"] = *(*st.items)[i - 1];
      if (i + 1 < n) loop["nextitem"] = *(*st.items)[i + 1];
      st.object = std::move(loop);
      st.made = true;
    }
    return st.object;
  }

  void exec_set(const stmt& s) {
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

  // The render's own variable `n` (borrowed first), or nullptr.
  const value* render_var(const std::string& n) const {
    for (const auto& [k, v] : borrowed_) {
      if (k == n) return v;
    }
    auto g = variables_.find(n);
    return g != variables_.end() ? &*g : nullptr;
  }

  // A variable of frame `f`; in the globals frame, also the render's variables.
  std::optional<ref> find_var(const frame& f, const std::string& n) const {
    auto v = f.vars.find(n);
    if (v != f.vars.end()) return v->second.read();
    if (&f == chain_.front()) {
      if (const value* g = render_var(n)) return ref(g, true);
    }
    return std::nullopt;
  }

  value* lookup_mut(const std::string& n) {
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

  const stmt* lookup_macro(const std::string& n) const {
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      if (find_var(**it, n)) return nullptr;
      auto m = (*it)->macros.find(n);
      if (m != (*it)->macros.end()) return m->second;
    }
    return nullptr;
  }

  call_args eval_args(const expr& e) {
    call_args a;
    a.pos.reserve(e.args.size());
    for (const auto& x : e.args) a.pos.push_back(eval(*x).take());
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x).take());
    return a;
  }

  // Whether evaluating the arguments of `e` may run template code.
  static bool args_run_code(const expr& e) {
    for (const auto& x : e.args) {
      if (x && x->may_run_code) return true;
    }
    for (const auto& kv : e.kwargs) {
      if (kv.second->may_run_code) return true;
    }
    return false;
  }

  ref eval_name(const std::string& n) {
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      if (auto v = find_var(**it, n)) return std::move(*v);
      if ((*it)->loop && n == "loop"sv) return ref(&loop_object(*(*it)->loop));
      if ((*it)->macros.count(n)) throw error("macro '" + n + "' used as a value is not supported");
    }
    return ref(undefined());
  }

  ref eval(const expr& e) {
    switch (e.kind) {
      case expr_kind::literal:
        return ref(&e.lit, true);
      case expr_kind::name:
        return eval_name(e.name);
      case expr_kind::block:
        return ref(block_value_);
      case expr_kind::list: {
        value r = value::array();
        for (const auto& x : e.args) r.push_back(eval(*x).take());
        return ref(std::move(r));
      }
      case expr_kind::dict: {
        value r = value::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          value k = eval(*e.args[i]).take();
          if (!k.is_string()) throw error("dict literal keys must be strings, got " + type_name(k));
          r[k.get<std::string>()] = eval(*e.args[i + 1]).take();
        }
        return ref(std::move(r));
      }
      case expr_kind::attr:
        return eval_attr(e);
      case expr_kind::index:
        return eval_index(e);
      case expr_kind::slice:
        return eval_slice(e);
      case expr_kind::call:
        return eval_call(e, nullptr);
      case expr_kind::filter: {
        ref v = eval(*e.object);
        if (v.items() && (e.name == "length"sv || e.name == "count"sv) && e.args.empty() &&
            e.kwargs.empty()) {
          return ref(value(v.items()->size()));
        }
        if (args_run_code(e)) v.pin();
        return ref(apply_filter(e.name, v.get(), eval_args(e)));
      }
      case expr_kind::test: {
        ref v = eval(*e.object);
        if (args_run_code(e)) v.pin();
        return ref(value(apply_test(e.name, v.get(), eval_args(e)) != e.negated));
      }
      case expr_kind::unary: {
        ref r = eval(*e.object);
        const value& v = r.get();
        if (e.name == "not"sv) return ref(value(!truthy(v)));
        if (!is_number(v))
          throw error("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
        if (e.name == "+"sv) return ref(is_int(v) ? value(as_int(v)) : v);
        return ref(is_int(v) ? value(-as_int(v)) : value(-as_double(v)));
      }
      case expr_kind::binary:
        return eval_binary(e);
      case expr_kind::compare:
        return eval_compare(e);
      case expr_kind::logical: {
        ref a = eval(*e.args[0]);
        bool t = truthy(a.get());
        if (e.name == "and"sv ? !t : t) return a;
        return eval(*e.args[1]);
      }
      case expr_kind::cond:
        if (truthy(eval(*e.args[1]).get())) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : ref(undefined());
    }
    throw error("unknown expression");
  }

  // `object.name`: loop fields without the loop object; a borrowed object's member in place.
  ref eval_attr(const expr& e) {
    if (e.object->kind == expr_kind::name && e.object->name == "loop"sv) {
      if (loop_state* st = nearest_loop()) {
        if (auto v = loop_field(*st, e.name)) return std::move(*v);
      }
    }
    ref base = eval(*e.object);
    const value& b = base.get();
    if (is_undefined(b))
      throw error("'" + describe(*e.object) + "' is undefined (reading ." + e.name + ")");
    if (!b.is_object()) return ref(undefined());
    auto it = b.find(e.name);
    if (it == b.end()) return ref(undefined());
    if (base.borrowed()) return ref(&*it, base.stable());
    return ref(value(std::move(const_cast<value&>(*it))));  // `base` is ours and dies here
  }

  // `object[a:b:c]`.
  ref eval_slice(const expr& e) {
    ref b = eval(*e.object);
    if (args_run_code(e)) b.pin();
    // A slice of a stable list (or of such a slice) is kept as pointers to its items.
    const auto* xs = b.items();
    if (xs || (b.stable() && b.get().is_array())) {
      const value& arr = b.get();
      const size_t n = xs ? xs->size() : arr.size();
      std::vector<const value*> picked;
      for (size_t i : slice_bounds(e, static_cast<int64_t>(n)))
        picked.push_back(xs ? (*xs)[i] : &arr[i]);
      return ref::list(std::move(picked));
    }
    return ref(eval_slice_of(e, b.get()));
  }

  // `a op b` for ~ and the arithmetic operators.
  ref eval_binary(const expr& e) {
    ref a = eval(*e.args[0]);
    if (e.args[1]->may_run_code) a.pin();
    ref b = eval(*e.args[1]);
    if (e.name == "~"sv) {
      // The left operand, once ours, grows in place: a chain a ~ b ~ c copies each part once.
      value r = a.borrowed() || !a.get().is_string() ? value(to_str(a.get())) : std::move(a).take();
      write(r.get_ref<std::string&>(), b.get());
      return ref(std::move(r));
    }
    if (e.name == "+"sv && !a.borrowed() && a.get().is_string() && b.get().is_string()) {
      value r = std::move(a).take();
      r.get_ref<std::string&>() += b.get().get_ref<const std::string&>();
      return ref(std::move(r));
    }
    return ref(arithmetic(e.name, a.get(), b.get()));
  }

  // A chain of comparisons `a < b <= c`, as Python evaluates it.
  ref eval_compare(const expr& e) {
    ref left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      if (e.args[i + 1]->may_run_code) left.pin();
      ref right = eval(*e.args[i + 1]);
      const value& l = left.get();
      const value& r = right.get();
      const std::string& op = e.ops[i];
      bool ok = op == "=="sv       ? equals(l, r)
                : op == "!="sv     ? !equals(l, r)
                : op == "in"sv     ? contains(r, l)
                : op == "not in"sv ? !contains(r, l)
                : op == "<"sv      ? compare(l, r) < 0
                : op == "<="sv     ? compare(l, r) <= 0
                : op == ">"sv      ? compare(l, r) > 0
                                   : compare(l, r) >= 0;
      if (!ok) return ref(value(false));
      left = std::move(right);
    }
    return ref(value(true));
  }

  // The innermost for loop's state when `loop` names it (no variable of that name nearer).
  loop_state* nearest_loop() const {
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      if ((*it)->vars.count("loop") || (*it)->macros.count("loop")) return nullptr;
      if (*it == chain_.front() && render_var("loop")) return nullptr;
      if ((*it)->loop) return (*it)->loop;
    }
    return nullptr;
  }

  ref eval_index(const expr& e) {
    ref base = eval(*e.object);
    if (e.args[0]->may_run_code) base.pin();
    ref key_ref = eval(*e.args[0]);
    const value& key = key_ref.get();
    if (const auto* xs = base.items(); xs && is_int(key)) {
      int64_t i = as_int(key), n = static_cast<int64_t>(xs->size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? ref((*xs)[static_cast<size_t>(i)], true) : ref(undefined());
    }
    const value& b = base.get();
    if (is_undefined(b)) throw error("'" + describe(*e.object) + "' is undefined (subscripted)");
    const value* hit = nullptr;
    if (b.is_object() && key.is_string()) {
      auto it = b.find(key.get_ref<const std::string&>());
      if (it != b.end()) hit = &*it;
    } else if ((b.is_array() || b.is_string()) && is_int(key)) {
      if (b.is_string()) {
        std::u32string s = decode(b.get_ref<const std::string&>());
        int64_t i = as_int(key), n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return ref(undefined());
        return ref(value(encode(s.substr(static_cast<size_t>(i), 1))));
      }
      int64_t i = as_int(key), n = static_cast<int64_t>(b.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) hit = &b[static_cast<size_t>(i)];
    }
    if (!hit) return ref(undefined());
    if (base.borrowed()) return ref(hit, base.stable());
    return ref(value(std::move(const_cast<value&>(*hit))));  // `base` is ours and dies here
  }

  // The indices `e` (a slice) selects of a sequence of `n` items.
  std::vector<size_t> slice_bounds(const expr& e, int64_t n) {
    value parts[3];
    const value* p[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[static_cast<size_t>(i)]) continue;
      parts[i] = eval(*e.args[static_cast<size_t>(i)]).take();
      if (!parts[i].is_null()) p[i] = &parts[i];
    }
    return slice_indices(n, p[0], p[1], p[2]);
  }

  value eval_slice_of(const expr& e, const value& b) {
    if (b.is_string()) {
      std::u32string s = decode(b.get_ref<const std::string&>()), r;
      for (size_t i : slice_bounds(e, static_cast<int64_t>(s.size()))) r += s[i];
      return value(encode(r));
    }
    if (b.is_array()) {
      value r = value::array();
      for (size_t i : slice_bounds(e, static_cast<int64_t>(b.size()))) r.push_back(b[i]);
      return r;
    }
    throw error("'" + type_name(b) + "' object is not subscriptable");
  }

  ref eval_call(const expr& e, const caller_ctx* with_caller) {
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
  value call_global(const std::string& n, const call_args& a) {
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

  std::string call_macro(const stmt& m, const call_args& a, const caller_ctx* with_caller) {
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

  value call_caller(const call_args& a) {
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

  const value& variables_;
  const borrowed_vars& borrowed_;
  const environment& env_;
  std::vector<frame*> chain_;
  const caller_ctx* caller_ = nullptr;
  const value* block_value_ = nullptr;
  int depth_ = 0;           // macro and caller() calls running
  int64_t iterations_ = 0;  // for-loop iterations so far
};

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
