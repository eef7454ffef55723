#include "actors/lib/llm/tokenizer/jinja/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "actors/lib/llm/tokenizer/jinja/limits.hpp"
#include "actors/lib/llm/tokenizer/utf8.hpp"

namespace milesrt::llm::jinja {

using namespace std::string_view_literals;

value undefined() { return value(value::value_t::discarded); }

namespace {
const char* const kGenerator = "\x01jinja generator";
}

value make_generator(value items) {
  value g = value::object();
  g[kGenerator] = std::move(items);
  return g;
}

bool is_generator(const value& v) {
  return v.is_object() && v.size() == 1 && v.begin().key() == kGenerator;
}

std::vector<value> iterate(const value& v) {
  std::vector<value> out;
  if (is_generator(v)) {
    const value& items = v.begin().value();
    out.assign(items.begin(), items.end());
  } else if (v.is_array()) {
    out.assign(v.begin(), v.end());
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) out.emplace_back(it.key());
  } else if (v.is_string()) {
    for (char32_t c : decode(v.get_ref<const std::string&>()))
      out.emplace_back(encode(std::u32string(1, c)));
  } else if (!is_undefined(v)) {
    throw error("'" + type_name(v) + "' object is not iterable");
  }
  return out;
}

bool truthy(const value& v) {
  switch (v.type()) {
    case value::value_t::discarded:
    case value::value_t::null:
      return false;
    case value::value_t::boolean:
      return v.get<bool>();
    case value::value_t::number_integer:
      return v.get<int64_t>() != 0;
    case value::value_t::number_unsigned:
      return v.get<uint64_t>() != 0;
    case value::value_t::number_float:
      return v.get<double>() != 0.0;
    case value::value_t::string:
      return !v.get_ref<const std::string&>().empty();
    case value::value_t::array:
    case value::value_t::object:
      return !v.empty();
    default:
      return true;
  }
}

bool is_int(const value& v) { return v.is_number_integer() || v.is_boolean(); }
bool is_number(const value& v) { return v.is_number() || v.is_boolean(); }
int64_t as_int(const value& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  throw error("expected a number, got " + type_name(v));
}
double as_double(const value& v) {
  if (v.is_number_float()) return v.get<double>();
  return static_cast<double>(as_int(v));
}

std::string type_name(const value& v) {
  switch (v.type()) {
    case value::value_t::discarded:
      return "Undefined";
    case value::value_t::null:
      return "NoneType";
    case value::value_t::boolean:
      return "bool";
    case value::value_t::number_integer:
    case value::value_t::number_unsigned:
      return "int";
    case value::value_t::number_float:
      return "float";
    case value::value_t::string:
      return "str";
    case value::value_t::array:
      return "list";
    case value::value_t::object:
      return is_generator(v) ? "generator" : "dict";
    default:
      return "object";
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  int p = 1;
  for (; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min(digits.size(), static_cast<size_t>(exp + 1)));
      ip.append(static_cast<size_t>(exp + 1) - ip.size(), '0');
      std::string fp = digits.size() > static_cast<size_t>(exp + 1)
                           ? digits.substr(static_cast<size_t>(exp + 1))
                           : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return sign + out;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += cp;
    i += n;
  }
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8::append(out, cp);
  return out;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

namespace {

// Characters Python's repr() escapes in a str: the C0/C1 controls, DEL and the separators and
// format characters that str.isprintable() rejects.
bool repr_escapes(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
         (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
         (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF);
}

void repr_string(std::string& out, const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos,
       has_double = s.find('"') != std::string::npos;
  char q = has_single && !has_double ? '"' : '\'';
  out += q;
  for (char32_t c : decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (repr_escapes(c)) {
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += encode(std::u32string(1, c));
    }
  }
  out += q;
}

void repr_into(std::string& out, const value& v) {
  if (is_generator(v))
    throw error("writing out a generator (the result of map/select/selectattr) is not supported");
  switch (v.type()) {
    case value::value_t::string:
      repr_string(out, v.get_ref<const std::string&>());
      return;
    case value::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& x : v) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, x);
      }
      out += ']';
      return;
    }
    case value::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        repr_string(out, it.key());
        out += ": ";
        repr_into(out, it.value());
      }
      out += '}';
      return;
    }
    default:
      out += to_str(v);
  }
}

void escape_json(std::string& out, const std::string& s, bool ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ascii && c == 0x7F)) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (ascii && c >= 0x80) {
          size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
          char32_t cp = decode(std::string_view(s).substr(i, n))[0];
          i += n - 1;
          if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                          0xD800 + (static_cast<unsigned>(cp) >> 10),
                          0xDC00 + (static_cast<unsigned>(cp) & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dumps_into(std::string& out, const value& v, const json_style& st, int level) {
  if (is_generator(v)) throw error("Object of type generator is not JSON serializable");
  auto newline = [&](int lv) {
    if (st.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(st.indent * lv), ' ');
  };
  switch (v.type()) {
    case value::value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      std::vector<value::const_iterator> items;
      for (auto it = v.begin(); it != v.end(); ++it) items.push_back(it);
      if (st.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto a, auto b) { return a.key() < b.key(); });
      }
      out += '{';
      bool first = true;
      for (auto it : items) {
        if (!first) out += st.item_sep;
        first = false;
        newline(level + 1);
        escape_json(out, it.key(), st.ensure_ascii);
        out += st.key_sep;
        dumps_into(out, it.value(), st, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    case value::value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& x : v) {
        if (!first) out += st.item_sep;
        first = false;
        newline(level + 1);
        dumps_into(out, x, st, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case value::value_t::string:
      escape_json(out, v.get_ref<const std::string&>(), st.ensure_ascii);
      return;
    case value::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case value::value_t::null:
      out += "null";
      return;
    case value::value_t::number_float: {
      double d = v.get<double>();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : float_repr(d);
      return;
    }
    case value::value_t::number_integer:
    case value::value_t::number_unsigned:
      out += v.dump();
      return;
    default:
      throw error("Object of type Undefined is not JSON serializable");
  }
}

}  // namespace

std::string to_str(const value& v) {
  switch (v.type()) {
    case value::value_t::discarded:
      return "";
    case value::value_t::null:
      return "None";
    case value::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case value::value_t::number_integer:
    case value::value_t::number_unsigned:
      return v.dump();
    case value::value_t::number_float:
      return float_repr(v.get<double>());
    case value::value_t::string:
      return v.get<std::string>();
    default:
      return repr(v);
  }
}

std::string repr(const value& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

std::string dumps(const value& v, const json_style& style) {
  std::string out;
  dumps_into(out, v, style, 0);
  return out;
}

bool equals(const value& a, const value& b) {
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case value::value_t::discarded:
      return true;
    case value::value_t::array: {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!equals(a[i], b[i])) return false;
      }
      return true;
    }
    case value::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto it = a.begin(); it != a.end(); ++it) {
        auto jt = b.find(it.key());
        if (jt == b.end() || !equals(it.value(), *jt)) return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

int compare(const value& a, const value& b) {
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b) ? 1 : 0;
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!equals(a[i], b[i])) return compare(a[i], b[i]);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
  }
  throw error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
              "'");
}

value arithmetic(const std::string& op, const value& a, const value& b) {
  auto bad = [&]() -> value {
    throw error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                type_name(b) + "'");
  };
  if (is_undefined(a) || is_undefined(b)) throw error("an undefined value used with '" + op + "'");
  if (op == "+"sv) {
    if (a.is_string() && b.is_string())
      return a.get<std::string>() + b.get_ref<const std::string&>();
    if (a.is_array() && b.is_array()) {
      value r = a;
      for (const auto& x : b) r.push_back(x);
      return r;
    }
  }
  if (op == "*"sv && ((a.is_string() || a.is_array()) && is_int(b))) {
    // A repetition is bounded as a render's text is (docs/limits.md, "Chat templates").
    const double unit = a.is_string() ? double(a.get_ref<const std::string&>().size()) : a.size();
    if (unit * static_cast<double>(as_int(b)) > double(limits::max_output)) {
      throw error(std::string(a.is_string() ? "a string" : "a list") + " repeated " +
                  std::to_string(as_int(b)) + " times: more than " +
                  std::to_string(limits::max_output) + (a.is_string() ? " bytes" : " items") +
                  " (the limit)");
    }
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
  if (op == "%"sv && a.is_string()) throw error("string formatting with '%' is not supported");
  if (!is_number(a) || !is_number(b)) return bad();
  bool ints = is_int(a) && is_int(b);
  if (op == "+"sv) return ints ? value(as_int(a) + as_int(b)) : value(as_double(a) + as_double(b));
  if (op == "-"sv) return ints ? value(as_int(a) - as_int(b)) : value(as_double(a) - as_double(b));
  if (op == "*"sv) return ints ? value(as_int(a) * as_int(b)) : value(as_double(a) * as_double(b));
  if (op == "/"sv) {
    if (as_double(b) == 0) throw error("division by zero");
    return as_double(a) / as_double(b);
  }
  if (op == "//"sv || op == "%"sv) {
    if (as_double(b) == 0) throw error("integer division or modulo by zero");
    if (ints) {
      int64_t x = as_int(a), y = as_int(b), q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return op == "//"sv ? value(q) : value(x - q * y);
    }
    double x = as_double(a), y = as_double(b), q = std::floor(x / y);
    return op == "//"sv ? value(q) : value(x - q * y);
  }
  if (op == "**"sv) {
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
    if (!item.is_string())
      throw error("'in <string>' requires string as left operand, not " + type_name(item));
    return container.get_ref<const std::string&>().find(item.get_ref<const std::string&>()) !=
           std::string::npos;
  }
  if (container.is_array()) {
    for (const auto& x : container) {
      if (equals(x, item)) return true;
    }
    return false;
  }
  if (container.is_object())
    return item.is_string() && container.contains(item.get_ref<const std::string&>());
  if (is_undefined(container)) return false;
  throw error("argument of type '" + type_name(container) + "' is not iterable");
}

}  // namespace milesrt::llm::jinja
