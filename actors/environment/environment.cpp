#include "actors/environment/environment.hpp"

#include "runtime/core/untrusted_text.hpp"

namespace milesrt::environment {

environment_registry builtin_environments() {
  environment_registry r("environment");
  r.add("calculator", make_calculator_environment);
  r.add("remote", make_remote_environment);
  return r;
}

json parse_options(const std::string& text, const std::string& field) {
  if (text.empty()) return json::object();
  if (auto deep = runtime::json_nesting_problem(text); !deep.empty())
    throw problem_error({field, deep});
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw problem_error({field, "not JSON: '" + text + "'"});
  if (!j.is_object()) throw problem_error({field, "expected a JSON object, got '" + text + "'"});
  return j;
}

}  // namespace milesrt::environment
