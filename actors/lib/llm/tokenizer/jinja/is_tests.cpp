// Jinja's tests (`v is name(args)`).
#include <string>
#include <string_view>

#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/str_ops.hpp"

namespace milesrt::llm::jinja {

bool apply_test(const std::string& name, const value& v, const call_args& a) {
  // Names compared as views: sizes first, no strlen per candidate.
  const std::string_view n = name;
  auto arg = [&]() -> const value& {
    if (a.pos.empty()) throw error("test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (n == "defined") return !is_undefined(v);
  if (n == "undefined") return is_undefined(v);
  if (n == "none") return v.is_null();
  if (n == "boolean") return v.is_boolean();
  if (n == "true") return v.is_boolean() && v.get<bool>();
  if (n == "false") return v.is_boolean() && !v.get<bool>();
  if (n == "integer") return v.is_number_integer();
  if (n == "float") return v.is_number_float();
  if (n == "number") return is_number(v);
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_object() && !is_generator(v);
  if (n == "iterable") return v.is_string() || v.is_array() || v.is_object() || is_undefined(v);
  if (n == "sequence") return v.is_string() || v.is_array() || (v.is_object() && !is_generator(v));
  if (n == "callable") return false;
  if (n == "escaped") return false;
  if (n == "sameas") {
    const value& o = arg();
    if (v.is_null() || v.is_boolean() || o.is_null() || o.is_boolean())
      return v.type() == o.type() && v == o;
    throw error("'sameas' is only supported for none, true and false");
  }
  if (n == "eq" || n == "equalto" || n == "==") return equals(v, arg());
  if (n == "ne" || n == "!=") return !equals(v, arg());
  if (n == "lt" || n == "lessthan" || n == "<") return compare(v, arg()) < 0;
  if (n == "le" || n == "<=") return compare(v, arg()) <= 0;
  if (n == "gt" || n == "greaterthan" || n == ">") return compare(v, arg()) > 0;
  if (n == "ge" || n == ">=") return compare(v, arg()) >= 0;
  if (n == "in") {
    const value& c = arg();
    if (c.is_string())
      return v.is_string() &&
             c.get_ref<const std::string&>().find(v.get<std::string>()) != std::string::npos;
    for (const auto& x : iterate(c)) {
      if (equals(x, v)) return true;
    }
    return false;
  }
  if (n == "odd" || n == "even") {
    if (!is_int(v)) throw error("test '" + name + "' needs an integer");
    int64_t r = as_int(v) % 2;
    return n == "odd" ? r != 0 : r == 0;
  }
  if (n == "divisibleby") {
    int64_t d = as_int(arg());
    if (d == 0) throw error("integer division or modulo by zero");
    return as_int(v) % d == 0;
  }
  if (n == "lower" || n == "upper") {
    if (!v.is_string()) return false;
    std::string s = v.get<std::string>();
    return n == "lower" ? lower(s) == s : upper(s) == s;
  }
  throw error("test '" + name + "' is not supported");
}

}  // namespace milesrt::llm::jinja
