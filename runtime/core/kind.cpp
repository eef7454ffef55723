#include "runtime/core/kind.hpp"

#include <stdexcept>

namespace milesrt::runtime {

const char* to_string(role r) {
  switch (r) {
    case role::source:
      return "source";
    case role::stage:
      return "stage";
    case role::learner:
      return "learner";
    case role::buffer:
      return "buffer";
  }
  return "?";
}

const char* to_string(param_type t) {
  switch (t) {
    case param_type::boolean:
      return "bool";
    case param_type::integer:
      return "int";
    case param_type::real:
      return "float";
    case param_type::text:
      return "text";
  }
  return "?";
}

void kind_registry::add(kind_descriptor kind) {
  std::string name = kind.name;
  if (!kinds_.emplace(name, std::move(kind)).second) {
    throw std::logic_error("actor kind '" + name + "' registered twice");
  }
}

const kind_descriptor* kind_registry::find(const std::string& name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> kind_registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : kinds_) out.push_back(name);
  return out;
}

}  // namespace milesrt::runtime
