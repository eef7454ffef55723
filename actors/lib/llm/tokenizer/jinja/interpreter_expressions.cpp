// The interpreter's expressions: literals, names (and a for loop's `loop`), attributes,
// subscripts and slices, filters and tests, operators and comparisons.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/interpreter.hpp"

namespace milesrt::llm::jinja {
namespace {

using namespace std::string_view_literals;

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

}  // namespace

std::string interpreter::describe(const expr& e) {
  if (e.kind == expr_kind::name) return e.name;
  if (e.kind == expr_kind::attr) return describe(*e.object) + "." + e.name;
  if (e.kind == expr_kind::index) return describe(*e.object) + "[...]";
  if (e.kind == expr_kind::call) return describe(*e.object) + "(...)";
  return "value";
}

ref interpreter::eval_name(const std::string& n) {
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    if (auto v = find_var(**it, n)) return std::move(*v);
    if ((*it)->loop && n == "loop"sv) return ref(&loop_object(*(*it)->loop));
    if ((*it)->macros.count(n)) throw error("macro '" + n + "' used as a value is not supported");
  }
  return ref(undefined());
}

ref interpreter::eval(const expr& e) {
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
ref interpreter::eval_attr(const expr& e) {
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
ref interpreter::eval_slice(const expr& e) {
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
ref interpreter::eval_binary(const expr& e) {
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
ref interpreter::eval_compare(const expr& e) {
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

ref interpreter::eval_index(const expr& e) {
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
std::vector<size_t> interpreter::slice_bounds(const expr& e, int64_t n) {
  value parts[3];
  const value* p[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (!e.args[static_cast<size_t>(i)]) continue;
    parts[i] = eval(*e.args[static_cast<size_t>(i)]).take();
    if (!parts[i].is_null()) p[i] = &parts[i];
  }
  return slice_indices(n, p[0], p[1], p[2]);
}

value interpreter::eval_slice_of(const expr& e, const value& b) {
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

// The render's own variable `n` (borrowed first), or nullptr.
const value* interpreter::render_var(const std::string& n) const {
  for (const auto& [k, v] : borrowed_) {
    if (k == n) return v;
  }
  auto g = variables_.find(n);
  return g != variables_.end() ? &*g : nullptr;
}

// A variable of frame `f`; in the globals frame, also the render's variables.
std::optional<ref> interpreter::find_var(const frame& f, const std::string& n) const {
  auto v = f.vars.find(n);
  if (v != f.vars.end()) return v->second.read();
  if (&f == chain_.front()) {
    if (const value* g = render_var(n)) return ref(g, true);
  }
  return std::nullopt;
}

// The innermost for loop's state when `loop` names it (no variable of that name nearer).
loop_state* interpreter::nearest_loop() const {
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    if ((*it)->vars.count("loop") || (*it)->macros.count("loop")) return nullptr;
    if (*it == chain_.front() && render_var("loop")) return nullptr;
    if ((*it)->loop) return (*it)->loop;
  }
  return nullptr;
}

// `loop.<name>` of `st`; nullopt for names that need the object.
std::optional<ref> interpreter::loop_field(const loop_state& st, const std::string& name) {
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

const value& interpreter::loop_object(loop_state& st) {
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

}  // namespace milesrt::llm::jinja
