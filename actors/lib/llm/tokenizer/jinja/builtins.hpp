#pragma once
/// Jinja's filters (filters.cpp) and tests (is_tests.cpp) and the Python str/dict methods templates
/// call (methods.cpp), over jinja::value. Names not listed there are errors ("filter 'x' is not
/// supported"), never silent output.

#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

/// Evaluated arguments of a filter, test, method or macro call.
struct call_args {
  std::vector<value> pos;
  std::vector<std::pair<std::string, value>> kw;

  /// The argument at position `i` or named `name`; nullptr when neither was given.
  const value* get(size_t i, const char* name) const;
};

/// `v|name(args)`.
value apply_filter(const std::string& name, const value& v, const call_args& args);
/// `v is name(args)`.
bool apply_test(const std::string& name, const value& v, const call_args& args);
/// `obj.name(args)` for str, dict and list methods; throws when `obj` has no such method.
value call_method(const value& obj, const std::string& name, const call_args& args);

}  // namespace milesrt::llm::jinja
