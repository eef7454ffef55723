#include "actors/lib/llm/tokenizer/jinja/value.hpp"

#include <algorithm>
#include <cmath>
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
