#include "actors/environment/environment.hpp"

#include "runtime/core/untrusted_text.hpp"

namespace milesrt::environment {

environment_registry builtin_environments() {
  environment_registry r("environment");
  r.add("calculator", make_calculator_environment);
  r.add("remote", make_remote_environment);
  return r;
}

json parse_options(const std::string& text, const std::string& what, std::string& error) {
  if (text.empty()) return json::object();
  if (auto deep = runtime::json_nesting_problem(text); !deep.empty()) {
    error = what + ": " + deep;
    return json::object();
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    error = what + ": not JSON: '" + text + "'";
    return json::object();
  }
  if (!j.is_object()) {
    error = what + ": expected a JSON object, got '" + text + "'";
    return json::object();
  }
  return j;
}

}  // namespace milesrt::environment
