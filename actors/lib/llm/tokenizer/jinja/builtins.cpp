#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace milesrt::llm::jinja {

const value* call_args::get(size_t i, const char* name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

const std::string& str_arg(const value& v, const char* what) {
  if (!v.is_string()) throw error(std::string(what) + " needs a string, got " + type_name(v));
  return v.get_ref<const std::string&>();
}

// Code points whose case Python changes but this engine does not (it maps ASCII letters only):
// Latin-1 and Latin Extended, Greek, Cyrillic, Armenian, Latin Extended Additional, Greek
// Extended, fullwidth letters, Deseret and other cased scripts.
bool non_ascii_cased(char32_t c) {
  return (c >= 0xB5 && c <= 0x58F) || (c >= 0x10A0 && c <= 0x10FF) ||
         (c >= 0x13A0 && c <= 0x13FF) || (c >= 0x1C80 && c <= 0x1CBF) ||
         (c >= 0x1D00 && c <= 0x1FFF) || (c >= 0x2C00 && c <= 0x2D2F) ||
         (c >= 0xA640 && c <= 0xA7FF) || (c >= 0xAB30 && c <= 0xABBF) ||
         (c >= 0xFB00 && c <= 0xFB17) || (c >= 0xFF21 && c <= 0xFF5A) ||
         (c >= 0x10400 && c <= 0x104FF) || (c >= 0x10C80 && c <= 0x10CFF) ||
         (c >= 0x118A0 && c <= 0x118FF) || (c >= 0x16E40 && c <= 0x16E9F) ||
         (c >= 0x1E900 && c <= 0x1E95F) || c == 0x2126 || c == 0x212A || c == 0x212B ||
         (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9);
}

std::u32string cased_text(const std::string& s, const char* op) {
  std::u32string u = decode(s);
  for (char32_t c : u) {
    if (non_ascii_cased(c)) throw error(std::string(op) + " of non-ASCII letters is not supported");
  }
  return u;
}

char32_t up(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t low(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string upper(const std::string& s) {
  std::u32string u = cased_text(s, "upper()");
  for (auto& c : u) c = up(c);
  return encode(u);
}
std::string lower(const std::string& s) {
  std::u32string u = cased_text(s, "lower()");
  for (auto& c : u) c = low(c);
  return encode(u);
}
std::string capitalize(const std::string& s) {
  std::u32string u = cased_text(s, "capitalize()");
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? up(u[i]) : low(u[i]);
  return encode(u);
}
// Python's str.title(): a letter after a non-letter starts a word.
std::string py_title(const std::string& s) {
  std::u32string u = cased_text(s, "title()");
  bool prev = false;
  for (auto& c : u) {
    c = prev ? low(c) : up(c);
    prev = alpha(c);
  }
  return encode(u);
}
// Jinja's title filter: words start after runs of -, whitespace, (, {, [ or <.
std::string jinja_title(const std::string& s) {
  std::u32string u = cased_text(s, "title"), out;
  bool start = true;
  for (char32_t c : u) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
    out += sep ? c : start ? up(c) : low(c);
    start = sep;
  }
  return encode(out);
}

bool ascii(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

std::string strip(const std::string& s, const value* chars, bool left, bool right) {
  bool ws = !chars || chars->is_null();
  // Bytes suffice while the ends are ASCII (UTF-8 never puts an ASCII byte inside a code point):
  // whitespace stops at the first non-ASCII byte, which may start a Unicode space, and an ASCII
  // `chars` never matches one. Otherwise code points, as Python sees them.
  const std::string* set_bytes = ws ? nullptr : &str_arg(*chars, "strip");
  if (ws || ascii(*set_bytes)) {
    auto drop = [&](unsigned char c) {
      return ws ? is_space(c) : set_bytes->find(static_cast<char>(c)) != std::string::npos;
    };
    size_t a = 0, b = s.size();
    bool decided = true;
    if (left) {
      while (a < b && static_cast<unsigned char>(s[a]) < 0x80 &&
             drop(static_cast<unsigned char>(s[a])))
        ++a;
      decided = decided && (a == b || static_cast<unsigned char>(s[a]) < 0x80 || !ws);
    }
    if (right) {
      while (b > a && static_cast<unsigned char>(s[b - 1]) < 0x80 &&
             drop(static_cast<unsigned char>(s[b - 1])))
        --b;
      decided = decided && (b == a || static_cast<unsigned char>(s[b - 1]) < 0x80 || !ws);
    }
    if (decided) return s.substr(a, b - a);
  }
  std::u32string u = decode(s);
  std::u32string set;
  if (!ws) set = decode(*set_bytes);
  auto drop = [&](char32_t c) { return ws ? is_space(c) : set.find(c) != std::u32string::npos; };
  size_t a = 0, b = u.size();
  if (left) {
    while (a < b && drop(u[a])) ++a;
  }
  if (right) {
    while (b > a && drop(u[b - 1])) --b;
  }
  return encode(u.substr(a, b - a));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {
    std::u32string u = decode(s);
    int64_t n = 0;
    for (char32_t c : u) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += encode(std::u32string(1, c));
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t k = s.find(from, pos);
    if (k == std::string::npos) break;
    out.append(s, pos, k - pos);
    out += to;
    pos = k + from.size();
    ++n;
  }
  out.append(s, pos);
  return out;
}

value split(const std::string& s, const value* sep, const value* maxsplit_v, bool from_right) {
  int64_t maxsplit = maxsplit_v ? as_int(*maxsplit_v) : -1;
  std::vector<std::string> parts;
  if (!sep || sep->is_null()) {
    std::u32string u = decode(s);
    if (from_right) std::reverse(u.begin(), u.end());
    size_t i = 0;
    while (true) {
      while (i < u.size() && is_space(u[i])) ++i;
      if (i == u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && is_space(u[e - 1])) --e;
        parts.push_back(encode(u.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !is_space(u[j])) ++j;
      parts.push_back(encode(u.substr(i, j - i)));
      i = j;
    }
    if (from_right) {
      for (auto& p : parts) {
        std::u32string x = decode(p);
        std::reverse(x.begin(), x.end());
        p = encode(x);
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::string& d = str_arg(*sep, "split");
    if (d.empty()) throw error("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t k = s.find(d, pos);
        if (k == std::string::npos) break;
        parts.push_back(s.substr(pos, k - pos));
        pos = k + d.size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        if (end < d.size()) break;
        size_t k = s.rfind(d, end - d.size());
        if (k == std::string::npos) break;
        parts.push_back(s.substr(k + d.size(), end - k - d.size()));
        end = k;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  value r = value::array();
  for (auto& p : parts) r.push_back(std::move(p));
  return r;
}

// Python's str.splitlines().
std::vector<std::string> splitlines(const std::string& s) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
        c == 0x85 || c == 0x2028 || c == 0x2029) {
      out.push_back(encode(u.substr(start, i - start)));
      if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < u.size()) out.push_back(encode(u.substr(start)));
  return out;
}

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

value call_method(const value& obj, const std::string& name, const call_args& a) {
  // Names compared as views: sizes first, no strlen per candidate.
  const std::string_view n = name;
  if (obj.is_object() && !is_generator(obj)) {
    if (n == "items") {
      value r = value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it)
        r.push_back(value::array({it.key(), it.value()}));
      return r;
    }
    if (n == "keys") {
      value r = value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it) r.push_back(it.key());
      return r;
    }
    if (n == "values") {
      value r = value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it) r.push_back(it.value());
      return r;
    }
    if (n == "get") {
      const value* k = a.get(0, "key");
      const value* d = a.get(1, "default");
      if (!k) throw error("get() needs a key");
      if (k->is_string()) {
        auto it = obj.find(k->get<std::string>());
        if (it != obj.end()) return *it;
      }
      return d ? *d : value(nullptr);
    }
  }
  if (obj.is_string()) {
    const std::string& s = obj.get_ref<const std::string&>();
    if (n == "startswith" || n == "endswith") {
      const value* p = a.get(0, "prefix");
      if (!p) throw error(name + "() needs an argument");
      std::vector<value> listed = p->is_array() ? iterate(*p) : std::vector<value>{};
      std::vector<const value*> options;
      if (p->is_array()) {
        for (const auto& o : listed) options.push_back(&o);
      } else {
        options.push_back(p);
      }
      for (const value* op : options) {
        const value& o = *op;
        const std::string& x = str_arg(o, name.c_str());
        bool hit = n[0] == 's'
                       ? s.compare(0, x.size(), x) == 0
                       : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        if (hit) return true;
      }
      if (a.pos.size() > 1) throw error(name + "() with start/end positions is not supported");
      return false;
    }
    if (n == "strip") return strip(s, a.get(0, "chars"), true, true);
    if (n == "lstrip") return strip(s, a.get(0, "chars"), true, false);
    if (n == "rstrip") return strip(s, a.get(0, "chars"), false, true);
    if (n == "split") return split(s, a.get(0, "sep"), a.get(1, "maxsplit"), false);
    if (n == "rsplit") return split(s, a.get(0, "sep"), a.get(1, "maxsplit"), true);
    if (n == "splitlines") return value(splitlines(s));
    if (n == "upper") return upper(s);
    if (n == "lower") return lower(s);
    if (n == "title") return py_title(s);
    if (n == "capitalize") return capitalize(s);
    if (n == "replace") {
      if (a.pos.size() < 2) throw error("replace() needs two arguments");
      const value* c = a.get(2, "count");
      return replace(s, str_arg(a.pos[0], "replace"), str_arg(a.pos[1], "replace"),
                     c ? as_int(*c) : -1);
    }
    if (n == "find" || n == "rfind" || n == "count" || n == "index") {
      if (a.pos.size() != 1) throw error(name + "() with positions is not supported");
      const std::string& x = str_arg(a.pos[0], name.c_str());
      if (n == "count") {
        if (x.empty()) return decode(s).size() + 1;
        int64_t c = 0;
        for (size_t k = s.find(x); k != std::string::npos; k = s.find(x, k + x.size())) ++c;
        return c;
      }
      size_t k = n == "rfind" ? s.rfind(x) : s.find(x);
      if (k == std::string::npos) {
        if (n == "index") throw error("substring not found");
        return -1;
      }
      return decode(s.substr(0, k)).size();
    }
    if (n == "join") {
      std::string out;
      bool first = true;
      for (const auto& x : iterate(a.pos.empty() ? value() : a.pos[0])) {
        if (!first) out += s;
        first = false;
        out += str_arg(x, "join");
      }
      return out;
    }
    if (n == "isdigit" || n == "isalpha" || n == "isspace" || n == "isalnum") {
      std::u32string u = decode(s);
      if (u.empty()) return false;
      for (char32_t c : u) {
        if (c >= 0x80 && n != "isspace")
          throw error(name + "() of non-ASCII text is not supported");
        bool ok = n == "isdigit"   ? (c >= '0' && c <= '9')
                  : n == "isalpha" ? alpha(c)
                  : n == "isspace" ? is_space(c)
                                   : (alpha(c) || (c >= '0' && c <= '9'));
        if (!ok) return false;
      }
      return true;
    }
  }
  throw error("method '" + name + "' of " + type_name(obj) + " is not supported");
}

}  // namespace milesrt::llm::jinja
