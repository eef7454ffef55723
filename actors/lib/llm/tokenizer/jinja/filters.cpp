// Jinja's filters (`v|name(args)`): text, numbers and defaults, sequences, ordering.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/str_ops.hpp"

namespace milesrt::llm::jinja {

const value* call_args::get(size_t i, const char* name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

// Jinja's getattr for selectattr/map/sort: "a.b" walks dicts; a missing key is undefined.
value attribute(const value& v, const std::string& path) {
  value cur = v;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (is_undefined(cur)) throw error("attribute '" + part + "' of an undefined value");
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_object() && cur.contains(part)) {
      cur = value(cur[part]);
    } else if (cur.is_array() && digits && std::stoul(part) < cur.size()) {
      cur = value(cur[std::stoul(part)]);
    } else {
      return undefined();
    }
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

size_t length(const value& v) {
  if (v.is_string()) return decode(v.get_ref<const std::string&>()).size();
  if ((v.is_array() || v.is_object()) && !is_generator(v)) return v.size();
  if (is_undefined(v)) return 0;
  throw error("object of type '" + type_name(v) + "' has no len()");
}

call_args tail(const call_args& a, size_t from) {
  call_args r;
  for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

// select/reject/selectattr/rejectattr: the test named by args[first] (truthiness without one).
bool select_test(const value& x, const call_args& a, size_t first) {
  if (a.pos.size() <= first) return truthy(x);
  return apply_test(str_arg(a.pos[first], "the test name"), x, tail(a, first + 1));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

value to_int(const value& v, const value& def) {
  if (v.is_boolean() || v.is_number_integer()) return as_int(v);
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  if (v.is_string()) {
    std::string s = strip(v.get<std::string>(), nullptr, true, true);
    char* end = nullptr;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return static_cast<int64_t>(i);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return static_cast<int64_t>(d);
  }
  return def;
}

value sort_key(const value& v, const value* attr, bool case_sensitive) {
  value k = attr && attr->is_string() ? attribute(v, attr->get<std::string>()) : v;
  if (!case_sensitive && k.is_string()) return lower(k.get<std::string>());
  return k;
}

value filter_tojson(const value& v, const call_args& a) {
  json_style st;
  const value* ascii = a.get(0, "ensure_ascii");
  const value* indent = a.get(1, "indent");
  const value* seps = a.get(2, "separators");
  const value* sort = a.get(3, "sort_keys");
  if (ascii) st.ensure_ascii = truthy(*ascii);
  if (indent && !indent->is_null()) {
    if (!is_int(*indent)) throw error("tojson: indent must be an integer");
    st.indent = static_cast<int>(std::max<int64_t>(0, as_int(*indent)));
    st.item_sep = ",";
  }
  if (seps && !seps->is_null()) {
    if (!seps->is_array() || seps->size() != 2 || !(*seps)[0].is_string() ||
        !(*seps)[1].is_string()) {
      throw error("tojson: separators must be a pair of strings");
    }
    st.item_sep = (*seps)[0].get<std::string>();
    st.key_sep = (*seps)[1].get<std::string>();
  }
  if (sort) st.sort_keys = truthy(*sort);
  return dumps(v, st);
}

value filter_indent(const value& v, const call_args& a) {
  const value* w = a.get(0, "width");
  const value* first = a.get(1, "first");
  const value* blank = a.get(2, "blank");
  std::string ind =
      w && w->is_string() ? w->get<std::string>() : std::string(w ? as_int(*w) : 4, ' ');
  std::vector<std::string> lines = splitlines(to_str(v) + "\n");
  std::string rv;
  if (blank && truthy(*blank)) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first && truthy(*first)) rv = ind + rv;
  return rv;
}

// Filters that write text: string, safe, escape, tojson, trim, the case filters, replace, indent
// and wordcount; nullopt for other names.
std::optional<value> text_filter(const std::string& name, const value& v, const call_args& a) {
  const std::string_view n = name;
  if (n == "string") return to_str(v);
  if (n == "safe") return v;
  if (n == "e" || n == "escape") return html_escape(to_str(v));
  if (n == "tojson") return filter_tojson(v, a);
  if (n == "trim") {
    if (v.is_string()) return strip(v.get_ref<const std::string&>(), a.get(0, "chars"), true, true);
    return strip(to_str(v), a.get(0, "chars"), true, true);
  }
  if (n == "upper") return upper(to_str(v));
  if (n == "lower") return lower(to_str(v));
  if (n == "capitalize") return capitalize(to_str(v));
  if (n == "title") return jinja_title(to_str(v));
  if (n == "replace") {
    const value* c = a.get(2, "count");
    if (!a.get(0, "old") || !a.get(1, "new")) throw error("replace needs two arguments");
    return replace(to_str(v), to_str(*a.get(0, "old")), to_str(*a.get(1, "new")),
                   c && !c->is_null() ? as_int(*c) : -1);
  }
  if (n == "indent") return filter_indent(v, a);
  if (n == "wordcount") return split(to_str(v), nullptr, nullptr, false).size();
  return std::nullopt;
}

// Filters of numbers and defaults: default, int, float, abs, round; nullopt for other names.
std::optional<value> number_filter(const std::string& name, const value& v, const call_args& a) {
  const std::string_view n = name;
  if (n == "default" || n == "d") {
    const value* d = a.get(0, "default_value");
    const value* boolean = a.get(1, "boolean");
    bool use = boolean && truthy(*boolean) ? !truthy(v) : is_undefined(v);
    return use ? (d ? *d : value("")) : v;
  }
  if (n == "int") {
    const value* d = a.get(0, "default");
    return to_int(v, d ? *d : value(0));
  }
  if (n == "float") {
    if (is_number(v)) return as_double(v);
    if (v.is_string()) {
      char* end = nullptr;
      std::string s = strip(v.get<std::string>(), nullptr, true, true);
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return d;
    }
    const value* d = a.get(0, "default");
    return d ? *d : value(0.0);
  }
  if (n == "abs") {
    if (!is_number(v)) throw error("abs needs a number");
    return is_int(v) ? value(std::llabs(as_int(v))) : value(std::fabs(as_double(v)));
  }
  if (n == "round") {
    const value* p = a.get(0, "precision");
    const value* m = a.get(1, "method");
    std::string method = m ? to_str(*m) : "common";
    double f = std::pow(10.0, p ? static_cast<double>(as_int(*p)) : 0.0), x = as_double(v) * f;
    double r = method == "common"  ? std::round(x)
               : method == "floor" ? std::floor(x)
                                   : std::ceil(x);
    return r / f;
  }
  return std::nullopt;
}

// Filters that pick from or reshape a sequence: list, first, last, reverse, join, items, the
// select family and map; nullopt for other names.
std::optional<value> sequence_filter(const std::string& name, const value& v, const call_args& a) {
  const std::string_view n = name;
  if (n == "list") {
    value r = value::array();
    for (auto& x : iterate(v)) r.push_back(std::move(x));
    return r;
  }
  if (n == "first") {
    auto items = iterate(v);
    return items.empty() ? undefined() : items.front();
  }
  if (n == "last") {
    if (is_generator(v)) throw error("'generator' object is not reversible");
    auto items = iterate(v);
    return items.empty() ? undefined() : items.back();
  }
  if (n == "reverse") {
    if (v.is_string()) {
      std::u32string u = decode(v.get_ref<const std::string&>());
      std::reverse(u.begin(), u.end());
      return encode(u);
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return make_generator(value(items));
  }
  if (n == "join") {
    const value* d = a.get(0, "d");
    const value* attr = a.get(1, "attribute");
    std::string sep = d ? to_str(*d) : "", out;
    bool first = true;
    for (const auto& x : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += to_str(attr ? attribute(x, to_str(*attr)) : x);
    }
    return out;
  }
  if (n == "items") {
    if (is_undefined(v)) return make_generator(value::array());
    if (!v.is_object() || is_generator(v))
      throw error("items needs a mapping, got " + type_name(v));
    value r = value::array();
    for (auto it = v.begin(); it != v.end(); ++it)
      r.push_back(value::array({it.key(), it.value()}));
    return make_generator(std::move(r));
  }
  if (n == "select" || n == "reject" || n == "selectattr" || n == "rejectattr") {
    bool attr = n.size() > 6;
    bool keep_if = n[0] == 's';
    if (attr && a.pos.empty()) throw error(name + " needs an attribute name");
    value r = value::array();
    for (auto& x : iterate(v)) {
      value probe = attr ? attribute(x, str_arg(a.pos[0], name.c_str())) : x;
      if (select_test(probe, a, attr ? 1 : 0) == keep_if) r.push_back(std::move(x));
    }
    return make_generator(std::move(r));
  }
  if (n == "map") {
    value r = value::array();
    if (const value* attr = a.get(100, "attribute")) {
      const value* def = a.get(100, "default");
      for (const auto& x : iterate(v)) {
        value y = attribute(x, to_str(*attr));
        r.push_back(is_undefined(y) && def ? *def : y);
      }
    } else {
      if (a.pos.empty()) throw error("map needs a filter name or attribute=");
      std::string f = str_arg(a.pos[0], "map");
      call_args rest = tail(a, 1);
      for (const auto& x : iterate(v)) r.push_back(apply_filter(f, x, rest));
    }
    return make_generator(std::move(r));
  }
  return std::nullopt;
}

// Filters that compare items: unique, sort, sum, min and max; nullopt for other names.
std::optional<value> ordering_filter(const std::string& name, const value& v, const call_args& a) {
  const std::string_view n = name;
  if (n == "unique") {
    const value* cs = a.get(0, "case_sensitive");
    const value* attr = a.get(1, "attribute");
    value r = value::array();
    std::vector<value> seen;
    for (auto& x : iterate(v)) {
      value k = sort_key(x, attr, cs && truthy(*cs));
      if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return equals(s, k); })) {
        seen.push_back(k);
        r.push_back(std::move(x));
      }
    }
    return make_generator(std::move(r));
  }
  if (n == "sort") {
    const value* rev = a.get(0, "reverse");
    const value* cs = a.get(1, "case_sensitive");
    const value* attr = a.get(2, "attribute");
    auto items = iterate(v);
    bool sensitive = cs && truthy(*cs);
    std::stable_sort(items.begin(), items.end(), [&](const value& x, const value& y) {
      return compare(sort_key(x, attr, sensitive), sort_key(y, attr, sensitive)) < 0;
    });
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    return value(items);
  }
  if (n == "sum") {
    const value* attr = a.get(0, "attribute");
    const value* start = a.get(1, "start");
    value total = start ? *start : value(0);
    for (const auto& x : iterate(v)) {
      value y = attr ? attribute(x, to_str(*attr)) : x;
      if (!is_number(total) || !is_number(y)) throw error("sum needs numbers");
      total = is_int(total) && is_int(y) ? value(as_int(total) + as_int(y))
                                         : value(as_double(total) + as_double(y));
    }
    return total;
  }
  if (n == "min" || n == "max") {
    auto items = iterate(v);
    if (items.empty()) return undefined();
    const value* cs = a.get(0, "case_sensitive");
    const value* attr = a.get(1, "attribute");
    bool sensitive = cs && truthy(*cs);
    value best = items[0];
    for (const auto& x : items) {
      int c = compare(sort_key(x, attr, sensitive), sort_key(best, attr, sensitive));
      if (n == "min" ? c < 0 : c > 0) best = x;
    }
    return best;
  }
  return std::nullopt;
}
}  // namespace

value apply_filter(const std::string& name, const value& v, const call_args& a) {
  // Names compared as views: sizes first, no strlen per candidate.
  const std::string_view n = name;
  if (n == "length" || n == "count") return length(v);
  if (auto r = text_filter(name, v, a)) return std::move(*r);
  if (auto r = number_filter(name, v, a)) return std::move(*r);
  if (auto r = sequence_filter(name, v, a)) return std::move(*r);
  if (auto r = ordering_filter(name, v, a)) return std::move(*r);
  throw error("filter '" + name + "' is not supported");
}

}  // namespace milesrt::llm::jinja
