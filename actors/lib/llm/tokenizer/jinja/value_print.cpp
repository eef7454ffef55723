// How values are written out: Python's str() and repr() (float_repr for floats) and json.dumps as
// transformers' `tojson` calls it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

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

}  // namespace milesrt::llm::jinja
