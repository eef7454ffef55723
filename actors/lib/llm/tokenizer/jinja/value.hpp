#pragma once
/// Values of the Jinja engine: nlohmann::ordered_json (key order kept, as Python dicts keep it)
/// with Jinja's `undefined` as the `discarded` kind, and the Python semantics templates rely on
/// (str(), repr(), truthiness, ==, <, json.dumps) written out once: value.cpp, and value_print.cpp
/// for str(), repr() and json.dumps.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace milesrt::llm::jinja {

using value = nlohmann::ordered_json;

/// A failure while rendering; `what()` says what and, once located, on which template line.
struct error : std::runtime_error {
  explicit error(const std::string& what, int line = 0)
      : std::runtime_error(line > 0 ? "template line " + std::to_string(line) + ": " + what : what),
        line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

/// Jinja's Undefined: what a missing variable, key or attribute evaluates to.
value undefined();
inline bool is_undefined(const value& v) { return v.is_discarded(); }

/// What select, reject, selectattr, rejectattr and map return: a Python generator, which is
/// always true, has no length and cannot be written out, but can be iterated or made a list.
value make_generator(value items);
bool is_generator(const value& v);
/// The items a for loop over `v` visits: list items, dict keys, characters; nothing for undefined.
std::vector<value> iterate(const value& v);

/// Python's bool(x) (undefined is false).
bool truthy(const value& v);
/// Python's str(x) as `{{ x }}` writes it (undefined writes nothing).
std::string to_str(const value& v);
/// Python's repr(x): strings quoted, lists and dicts as Python writes them.
std::string repr(const value& v);
/// Python's repr(float): the shortest text that reads back to the same double.
std::string float_repr(double d);
/// Python's type name of a value, for error messages.
std::string type_name(const value& v);

/// Options of Python's json.dumps as transformers' `tojson` passes them.
struct json_style {
  int indent = -1;              ///< -1: None (one line).
  std::string item_sep = ", ";  ///< "," when indent is set and no separators are given.
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
/// json.dumps(v, ...) byte for byte.
std::string dumps(const value& v, const json_style& style);

/// Python's ==, with ints, floats and bools compared as numbers.
bool equals(const value& a, const value& b);
/// Python's <, == and > for numbers, strings and lists: negative, zero or positive. Throws for
/// values Python cannot order.
int compare(const value& a, const value& b);
/// Python's `a op b` for the arithmetic operators (+ - * / // % **; + and * on strings and lists
/// too), with Python's errors.
value arithmetic(const std::string& op, const value& a, const value& b);
/// Python's `item in container` for strings, lists, dicts and generators (false for undefined).
bool contains(const value& container, const value& item);
/// Numbers: true for ints (and bools), false for floats.
bool is_int(const value& v);
bool is_number(const value& v);
int64_t as_int(const value& v);
double as_double(const value& v);

/// Code points of a UTF-8 string (the input is valid: it comes from JSON or the template).
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
/// Python's str.isspace for one code point.
bool is_space(char32_t c);

}  // namespace milesrt::llm::jinja
