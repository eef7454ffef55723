#include "actors/lib/llm/tokenizer/jinja/program.hpp"

#include <cctype>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/parser.hpp"

namespace milesrt::llm::jinja {
namespace {

// An evaluated expression: a pointer to a value that outlives the expression (a variable, a
// literal, part of either) or an owned temporary, so that `messages[i].content` copies nothing.
class ref {
 public:
  explicit ref(const value* p) : p_(p) {}
  explicit ref(value v) : own_(std::move(v)) {}
  const value& get() const { return p_ ? *p_ : own_; }
  bool borrowed() const { return p_ != nullptr; }
  value take() && { return p_ ? *p_ : std::move(own_); }

 private:
  value own_;
  const value* p_ = nullptr;
};

struct frame {
  std::unordered_map<std::string, value> vars;
  std::unordered_map<std::string, const stmt*> macros;
};

struct caller_ctx {
  const stmt* block;
  std::vector<frame*> chain;
  const caller_ctx* outer;
};

enum class flow { normal, break_, continue_ };

// Python's slice.indices(len) and the indices it selects.
std::vector<size_t> slice_indices(int64_t n, const value* start, const value* stop, const value* step) {
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

value arithmetic(const std::string& op, const value& a, const value& b) {
  auto bad = [&]() -> value {
    throw error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  };
  if (is_undefined(a) || is_undefined(b)) throw error("an undefined value used with '" + op + "'");
  if (op == "+") {
    if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get_ref<const std::string&>();
    if (a.is_array() && b.is_array()) {
      value r = a;
      for (const auto& x : b) r.push_back(x);
      return r;
    }
  }
  if (op == "*" && ((a.is_string() || a.is_array()) && is_int(b))) {
    value r = a.is_string() ? value("") : value::array();
    for (int64_t i = 0; i < as_int(b); ++i) {
      if (a.is_string()) {
        r.get_ref<std::string&>() += a.get_ref<const std::string&>();
      } else {
        for (const auto& x : a) r.push_back(x);
      }
    }
    return r;
  }
  if (op == "%" && a.is_string()) throw error("string formatting with '%' is not supported");
  if (!is_number(a) || !is_number(b)) return bad();
  bool ints = is_int(a) && is_int(b);
  if (op == "+") return ints ? value(as_int(a) + as_int(b)) : value(as_double(a) + as_double(b));
  if (op == "-") return ints ? value(as_int(a) - as_int(b)) : value(as_double(a) - as_double(b));
  if (op == "*") return ints ? value(as_int(a) * as_int(b)) : value(as_double(a) * as_double(b));
  if (op == "/") {
    if (as_double(b) == 0) throw error("division by zero");
    return as_double(a) / as_double(b);
  }
  if (op == "//" || op == "%") {
    if (as_double(b) == 0) throw error("integer division or modulo by zero");
    if (ints) {
      int64_t x = as_int(a), y = as_int(b), q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return op == "//" ? value(q) : value(x - q * y);
    }
    double x = as_double(a), y = as_double(b), q = std::floor(x / y);
    return op == "//" ? value(q) : value(x - q * y);
  }
  if (op == "**") {
    if (ints && as_int(b) >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < as_int(b); ++i) r *= as_int(a);
      return r;
    }
    return std::pow(as_double(a), as_double(b));
  }
  return bad();
}

bool contains(const value& container, const value& item) {
  if (is_generator(container)) return contains(container.begin().value(), item);
  if (container.is_string()) {
    if (!item.is_string()) throw error("'in <string>' requires string as left operand, not " + type_name(item));
    return container.get_ref<const std::string&>().find(item.get_ref<const std::string&>()) != std::string::npos;
  }
  if (container.is_array()) {
    for (const auto& x : container) {
      if (equals(x, item)) return true;
    }
    return false;
  }
  if (container.is_object()) return item.is_string() && container.contains(item.get_ref<const std::string&>());
  if (is_undefined(container)) return false;
  throw error("argument of type '" + type_name(container) + "' is not iterable");
}

std::string describe(const expr& e) {
  if (e.kind == expr_kind::name) return e.name;
  if (e.kind == expr_kind::attr) return describe(*e.object) + "." + e.name;
  if (e.kind == expr_kind::index) return describe(*e.object) + "[...]";
  if (e.kind == expr_kind::call) return describe(*e.object) + "(...)";
  return "value";
}

class interpreter {
 public:
  // `variables` are read in place (no copy per render); the globals frame shadows them once the
  // template sets or mutates one of those names.
  interpreter(frame& globals, const value& variables, const environment& env, bool loop_neighbours)
      : variables_(variables), env_(env), loop_neighbours_(loop_neighbours) {
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
      case stmt_kind::text: out += s.text; return flow::normal;
      case stmt_kind::output: out += to_str(eval(*s.value).get()); return flow::normal;
      case stmt_kind::if_:
        for (const auto& [c, b] : s.branches) {
          if (!c || truthy(eval(*c).get())) return exec(b);
        }
        return flow::normal;
      case stmt_kind::for_: exec_for(s); return flow::normal;
      case stmt_kind::set: exec_set(s); return flow::normal;
      case stmt_kind::set_block: {
        value v = capture(s.main);
        if (s.value) v = with_block(*s.value, v);
        chain_.back()->vars[s.targets[0]] = std::move(v);
        return flow::normal;
      }
      case stmt_kind::macro: chain_.back()->macros[s.text] = &s; return flow::normal;
      case stmt_kind::call_block: {
        caller_ctx ctx{&s, chain_, caller_};
        out += to_str(eval_call(*s.value, &ctx).get());
        return flow::normal;
      }
      case stmt_kind::filter_block: out += to_str(with_block(*s.value, capture(s.main))); return flow::normal;
      case stmt_kind::generation: return exec(s.main);
      case stmt_kind::with_: {
        frame f;
        for (const auto& [n, e] : s.params) f.vars[n] = eval(*e).take();
        chain_.push_back(&f);
        flow r = exec(s.main);
        chain_.pop_back();
        return r;
      }
      case stmt_kind::break_: return flow::break_;
      case stmt_kind::continue_: return flow::continue_;
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

  void bind(frame& f, const std::vector<std::string>& targets, value v) {
    if (targets.size() == 1) {
      f.vars[targets[0]] = std::move(v);
      return;
    }
    std::vector<value> items = iterate(v);
    if (items.size() != targets.size()) {
      throw error("cannot unpack " + std::to_string(items.size()) + " values into " +
                  std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < items.size(); ++i) f.vars[targets[i]] = std::move(items[i]);
  }

  void exec_for(const stmt& s) {
    std::vector<value> items = iterate(eval(*s.value).get());
    frame f;
    chain_.push_back(&f);
    if (s.cond) {
      std::vector<value> kept;
      for (auto& x : items) {
        bind(f, s.targets, x);
        if (truthy(eval(*s.cond).get())) kept.push_back(std::move(x));
      }
      items = std::move(kept);
      f.vars.clear();
    }
    const size_t n = items.size();
    for (size_t i = 0; i < n; ++i) {
      // Without previtem / nextitem nothing reads items[i] again: hand it over instead of a copy.
      bind(f, s.targets, loop_neighbours_ ? items[i] : std::move(items[i]));
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
      if (loop_neighbours_ && i > 0) loop["previtem"] = items[i - 1];
      if (loop_neighbours_ && i + 1 < n) loop["nextitem"] = items[i + 1];
      f.vars["loop"] = std::move(loop);
      if (exec(s.main) == flow::break_) break;
    }
    chain_.pop_back();
    if (n == 0) exec(s.else_body);
  }

  void exec_set(const stmt& s) {
    value v = eval(*s.value).take();
    if (!s.attr.empty()) {
      value* ns = lookup_mut(s.targets[0]);
      if (!ns || !ns->is_object()) throw error("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "'");
      (*ns)[s.attr] = std::move(v);
      return;
    }
    bind(*chain_.back(), s.targets, std::move(v));
  }

  // A variable of frame `f`; in the globals frame, also the render's variables.
  const value* find_var(const frame& f, const std::string& n) const {
    auto v = f.vars.find(n);
    if (v != f.vars.end()) return &v->second;
    if (&f == chain_.front()) {
      auto g = variables_.find(n);
      if (g != variables_.end()) return &*g;
    }
    return nullptr;
  }

  value* lookup_mut(const std::string& n) {
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      auto v = (*it)->vars.find(n);
      if (v != (*it)->vars.end()) return &v->second;
      if (*it == chain_.front()) {
        auto g = variables_.find(n);
        if (g != variables_.end()) return &((*it)->vars[n] = *g);  // copied on first write
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
    for (const auto& x : e.args) a.pos.push_back(eval(*x).take());
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x).take());
    return a;
  }

  ref eval(const expr& e) {
    switch (e.kind) {
      case expr_kind::literal: return ref(&e.lit);
      case expr_kind::name: {
        for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
          if (const value* v = find_var(**it, e.name)) return ref(v);
          if ((*it)->macros.count(e.name)) throw error("macro '" + e.name + "' used as a value is not supported");
        }
        return ref(undefined());
      }
      case expr_kind::block: return ref(block_value_);
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
      case expr_kind::attr: {
        ref base = eval(*e.object);
        const value& b = base.get();
        if (is_undefined(b)) throw error("'" + describe(*e.object) + "' is undefined (reading ." + e.name + ")");
        if (!b.is_object()) return ref(undefined());
        auto it = b.find(e.name);
        if (it == b.end()) return ref(undefined());
        return base.borrowed() ? ref(&*it) : ref(value(*it));
      }
      case expr_kind::index: return eval_index(e);
      case expr_kind::slice: return eval_slice(e);
      case expr_kind::call: return eval_call(e, nullptr);
      case expr_kind::filter: {
        ref v = eval(*e.object);
        return ref(apply_filter(e.name, v.get(), eval_args(e)));
      }
      case expr_kind::test: {
        ref v = eval(*e.object);
        return ref(value(apply_test(e.name, v.get(), eval_args(e)) != e.negated));
      }
      case expr_kind::unary: {
        value v = eval(*e.object).take();
        if (e.name == "not") return ref(value(!truthy(v)));
        if (!is_number(v)) throw error("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
        if (e.name == "+") return ref(is_int(v) ? value(as_int(v)) : v);
        return ref(is_int(v) ? value(-as_int(v)) : value(-as_double(v)));
      }
      case expr_kind::binary: {
        ref a = eval(*e.args[0]);
        ref b = eval(*e.args[1]);
        if (e.name == "~") return ref(value(to_str(a.get()) + to_str(b.get())));
        return ref(arithmetic(e.name, a.get(), b.get()));
      }
      case expr_kind::compare: {
        value left = eval(*e.args[0]).take();
        for (size_t i = 0; i < e.ops.size(); ++i) {
          value right = eval(*e.args[i + 1]).take();
          const std::string& op = e.ops[i];
          bool ok = op == "==" ? equals(left, right)
                    : op == "!=" ? !equals(left, right)
                    : op == "in" ? contains(right, left)
                    : op == "not in" ? !contains(right, left)
                    : op == "<" ? compare(left, right) < 0
                    : op == "<=" ? compare(left, right) <= 0
                    : op == ">" ? compare(left, right) > 0
                                : compare(left, right) >= 0;
          if (!ok) return ref(value(false));
          left = std::move(right);
        }
        return ref(value(true));
      }
      case expr_kind::logical: {
        ref a = eval(*e.args[0]);
        bool t = truthy(a.get());
        if (e.name == "and" ? !t : t) return a;
        return eval(*e.args[1]);
      }
      case expr_kind::cond:
        if (truthy(eval(*e.args[1]).get())) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : ref(undefined());
    }
    throw error("unknown expression");
  }

  ref eval_index(const expr& e) {
    ref base = eval(*e.object);
    value key = eval(*e.args[0]).take();
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
    return base.borrowed() ? ref(hit) : ref(value(*hit));
  }

  ref eval_slice(const expr& e) {
    value b = eval(*e.object).take();
    value parts[3];
    const value* p[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[static_cast<size_t>(i)]) continue;
      parts[i] = eval(*e.args[static_cast<size_t>(i)]).take();
      if (!parts[i].is_null()) p[i] = &parts[i];
    }
    if (b.is_string()) {
      std::u32string s = decode(b.get_ref<const std::string&>()), r;
      for (size_t i : slice_indices(static_cast<int64_t>(s.size()), p[0], p[1], p[2])) r += s[i];
      return ref(value(encode(r)));
    }
    if (b.is_array()) {
      value r = value::array();
      for (size_t i : slice_indices(static_cast<int64_t>(b.size()), p[0], p[1], p[2])) r.push_back(b[i]);
      return ref(std::move(r));
    }
    throw error("'" + type_name(b) + "' object is not subscriptable");
  }

  ref eval_call(const expr& e, const caller_ctx* with_caller) {
    const expr& callee = *e.object;
    if (callee.kind == expr_kind::name) {
      if (const stmt* m = lookup_macro(callee.name)) return ref(value(call_macro(*m, eval_args(e), with_caller)));
      if (with_caller) throw error("{% call %} of '" + callee.name + "', which is not a macro");
      return ref(call_global(callee.name, eval_args(e)));
    }
    if (with_caller) throw error("{% call %} needs a macro call");
    if (callee.kind == expr_kind::attr) {
      ref obj = eval(*callee.object);
      if (is_undefined(obj.get())) {
        throw error("'" + describe(*callee.object) + "' is undefined (calling ." + callee.name + "())");
      }
      return ref(call_method(obj.get(), callee.name, eval_args(e)));
    }
    throw error("calling " + describe(callee) + " is not supported");
  }

  value call_global(const std::string& n, const call_args& a) {
    if (n == "raise_exception") {
      throw error(a.pos.empty() ? std::string("raise_exception") : to_str(a.pos[0]));
    }
    if (n == "strftime_now") {
      if (a.pos.empty() || !a.pos[0].is_string()) throw error("strftime_now(format) needs a format string");
      std::tm tm{};
      if (env_.now) {
        tm = *env_.now;
      } else {
        std::time_t t = std::time(nullptr);
        localtime_r(&t, &tm);
      }
      char buf[256];
      size_t len = std::strftime(buf, sizeof buf, a.pos[0].get_ref<const std::string&>().c_str(), &tm);
      return std::string(buf, len);
    }
    if (n == "range") {
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
      value r = value::array();
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) r.push_back(i);
      return r;
    }
    if (n == "namespace" || n == "dict") {
      value r = value::object();
      for (const auto& p : a.pos) {
        if (!p.is_object()) throw error(n + "() takes keyword arguments or a dict");
        for (auto it = p.begin(); it != p.end(); ++it) r[it.key()] = it.value();
      }
      for (const auto& [k, v] : a.kw) r[k] = v;
      return r;
    }
    if (n == "caller" && caller_) return call_caller(a);
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      if (find_var(**it, n)) throw error("'" + n + "' is not callable");
    }
    throw error("'" + n + "' is undefined (called as a function)");
  }

  std::string call_macro(const stmt& m, const call_args& a, const caller_ctx* with_caller) {
    if (a.pos.size() > m.params.size()) {
      throw error("macro '" + m.text + "' takes " + std::to_string(m.params.size()) + " arguments, got " +
                  std::to_string(a.pos.size()));
    }
    frame f;
    std::vector<frame*> saved = chain_;
    chain_ = {chain_.front(), &f};
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, def] = m.params[i];
      const value* given = a.get(i, name.c_str());
      f.vars[name] = given ? *given : def ? eval(*def).take() : undefined();
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
    frame f;
    for (size_t i = 0; i < ctx->block->params.size(); ++i) {
      const auto& [name, def] = ctx->block->params[i];
      const value* given = a.get(i, name.c_str());
      f.vars[name] = given ? *given : def ? eval(*def).take() : undefined();
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
  const environment& env_;
  const bool loop_neighbours_;
  std::vector<frame*> chain_;
  const caller_ctx* caller_ = nullptr;
  const value* block_value_ = nullptr;
};

// Whether the template may read loop.previtem / loop.nextitem: true unless every word `loop` in the
// source is followed by `.` and one of the other attributes (so `{{ loop }}`, `loop|...` or
// `loop['prev' ~ 'item']` keep them).
bool mentions_loop_neighbours(std::string_view src) {
  static const char* const plain[] = {"index0", "index", "revindex0", "revindex", "first", "last",
                                      "length", "depth0", "depth", "cycle", "changed"};
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = src.find("loop"); at != std::string_view::npos; at = src.find("loop", at + 4)) {
    if ((at > 0 && word(src[at - 1])) || (at + 4 < src.size() && word(src[at + 4]))) continue;
    size_t k = at + 4;
    while (k < src.size() && (src[k] == ' ' || src[k] == '\t')) ++k;
    if (k >= src.size() || src[k] != '.') return true;
    ++k;
    while (k < src.size() && (src[k] == ' ' || src[k] == '\t')) ++k;
    size_t e = k;
    while (e < src.size() && word(src[e])) ++e;
    const std::string_view attr = src.substr(k, e - k);
    bool known = false;
    for (const char* a : plain) known = known || attr == a;
    if (!known) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<const program> program::parse(std::string_view source) {
  auto p = std::shared_ptr<program>(new program());
  p->body_ = jinja::parse(source);
  p->loop_neighbours_ = mentions_loop_neighbours(source);
  return p;
}

std::string program::render(const value& variables, const environment& env) const {
  if (!variables.is_object()) throw error("template variables must be an object");
  frame globals;
  interpreter in(globals, variables, env, loop_neighbours_);
  in.exec(body_);
  return std::move(in.out);
}

}  // namespace milesrt::llm::jinja
