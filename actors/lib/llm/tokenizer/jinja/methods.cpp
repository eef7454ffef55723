// The Python methods templates call on values (`obj.name(args)`): dict methods and str methods,
// each a named handler in its type's table.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/str_ops.hpp"

namespace milesrt::llm::jinja {
namespace {

/// A dict method: the dict and the call's arguments.
using dict_method = value (*)(const value& obj, const call_args& a);
/// A str method: the string, the name it was called by (one handler may serve several) and the
/// call's arguments.
using str_method = value (*)(const std::string& s, const std::string& name, const call_args& a);

value dict_items(const value& obj, const call_args&) {
  value r = value::array();
  for (auto it = obj.begin(); it != obj.end(); ++it)
    r.push_back(value::array({it.key(), it.value()}));
  return r;
}

value dict_keys(const value& obj, const call_args&) {
  value r = value::array();
  for (auto it = obj.begin(); it != obj.end(); ++it) r.push_back(it.key());
  return r;
}

value dict_values(const value& obj, const call_args&) {
  value r = value::array();
  for (auto it = obj.begin(); it != obj.end(); ++it) r.push_back(it.value());
  return r;
}

value dict_get(const value& obj, const call_args& a) {
  const value* k = a.get(0, "key");
  const value* d = a.get(1, "default");
  if (!k) throw error("get() needs a key");
  if (k->is_string()) {
    auto it = obj.find(k->get<std::string>());
    if (it != obj.end()) return *it;
  }
  return d ? *d : value(nullptr);
}

const std::unordered_map<std::string_view, dict_method>& dict_methods() {
  static const std::unordered_map<std::string_view, dict_method> table = {
      {"items", dict_items}, {"keys", dict_keys}, {"values", dict_values}, {"get", dict_get}};
  return table;
}

// startswith and endswith: a prefix (suffix) or a list of them.
value str_affix(const std::string& s, const std::string& name, const call_args& a) {
  const std::string_view n = name;
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

value str_strip(const std::string& s, const std::string&, const call_args& a) {
  return strip(s, a.get(0, "chars"), true, true);
}
value str_lstrip(const std::string& s, const std::string&, const call_args& a) {
  return strip(s, a.get(0, "chars"), true, false);
}
value str_rstrip(const std::string& s, const std::string&, const call_args& a) {
  return strip(s, a.get(0, "chars"), false, true);
}
value str_split(const std::string& s, const std::string&, const call_args& a) {
  return split(s, a.get(0, "sep"), a.get(1, "maxsplit"), false);
}
value str_rsplit(const std::string& s, const std::string&, const call_args& a) {
  return split(s, a.get(0, "sep"), a.get(1, "maxsplit"), true);
}
value str_splitlines(const std::string& s, const std::string&, const call_args&) {
  return value(splitlines(s));
}
value str_upper(const std::string& s, const std::string&, const call_args&) { return upper(s); }
value str_lower(const std::string& s, const std::string&, const call_args&) { return lower(s); }
value str_title(const std::string& s, const std::string&, const call_args&) { return py_title(s); }
value str_capitalize(const std::string& s, const std::string&, const call_args&) {
  return capitalize(s);
}

value str_replace(const std::string& s, const std::string&, const call_args& a) {
  if (a.pos.size() < 2) throw error("replace() needs two arguments");
  const value* c = a.get(2, "count");
  return replace(s, str_arg(a.pos[0], "replace"), str_arg(a.pos[1], "replace"),
                 c ? as_int(*c) : -1);
}

// find, rfind, count and index of a substring.
value str_search(const std::string& s, const std::string& name, const call_args& a) {
  const std::string_view n = name;
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

value str_join(const std::string& s, const std::string&, const call_args& a) {
  std::string out;
  bool first = true;
  for (const auto& x : iterate(a.pos.empty() ? value() : a.pos[0])) {
    if (!first) out += s;
    first = false;
    out += str_arg(x, "join");
  }
  return out;
}

// isdigit, isalpha, isspace and isalnum.
value str_classify(const std::string& s, const std::string& name, const call_args&) {
  const std::string_view n = name;
  std::u32string u = decode(s);
  if (u.empty()) return false;
  for (char32_t c : u) {
    if (c >= 0x80 && n != "isspace") throw error(name + "() of non-ASCII text is not supported");
    bool ok = n == "isdigit"   ? (c >= '0' && c <= '9')
              : n == "isalpha" ? is_ascii_letter(c)
              : n == "isspace" ? is_space(c)
                               : (is_ascii_letter(c) || (c >= '0' && c <= '9'));
    if (!ok) return false;
  }
  return true;
}

const std::unordered_map<std::string_view, str_method>& str_methods() {
  static const std::unordered_map<std::string_view, str_method> table = {
      {"startswith", str_affix}, {"endswith", str_affix},        {"strip", str_strip},
      {"lstrip", str_lstrip},    {"rstrip", str_rstrip},         {"split", str_split},
      {"rsplit", str_rsplit},    {"splitlines", str_splitlines}, {"upper", str_upper},
      {"lower", str_lower},      {"title", str_title},           {"capitalize", str_capitalize},
      {"replace", str_replace},  {"find", str_search},           {"rfind", str_search},
      {"count", str_search},     {"index", str_search},          {"join", str_join},
      {"isdigit", str_classify}, {"isalpha", str_classify},      {"isspace", str_classify},
      {"isalnum", str_classify}};
  return table;
}

}  // namespace

value call_method(const value& obj, const std::string& name, const call_args& a) {
  const std::string_view n = name;
  if (obj.is_object() && !is_generator(obj)) {
    const auto& dict = dict_methods();
    if (auto it = dict.find(n); it != dict.end()) return it->second(obj, a);
  }
  if (obj.is_string()) {
    const auto& str = str_methods();
    if (auto it = str.find(n); it != str.end())
      return it->second(obj.get_ref<const std::string&>(), name, a);
  }
  throw error("method '" + name + "' of " + type_name(obj) + " is not supported");
}

}  // namespace milesrt::llm::jinja
