#pragma once
/// Named objects a program offers its plugins besides the kind registry — an application's own
/// extension points, such as registries of losses. The runtime stores and hands them out and never
/// looks inside; each name's documentation (where the program offers it) says what type it is.

#include <map>
#include <stdexcept>
#include <string>

namespace milesrt::runtime {

class extension_points {
 public:
  /// Offers `object` (owned by the caller, alive while plugins may load) as `name`.
  void offer(const std::string& name, void* object) { points_[name] = object; }

  /// The object offered as `name`, as the T its documentation names; an unknown name throws
  /// std::out_of_range listing the offered ones.
  template <typename T>
  T& get(const std::string& name) const {
    auto it = points_.find(name);
    if (it == points_.end()) {
      std::string known;
      for (const auto& [n, _] : points_) known += (known.empty() ? "" : ", ") + n;
      throw std::out_of_range("no extension point '" + name +
                              "' (offered: " + (known.empty() ? "none" : known) + ")");
    }
    return *static_cast<T*>(it->second);
  }

 private:
  std::map<std::string, void*> points_;
};

}  // namespace milesrt::runtime
