#pragma once
/// Named factories of one extension point of the RL library (policy losses, advantage
/// estimators). A registry is an object: the code that needs one builds it (builtin.hpp gives the
/// built-in entries), a plugin adds its own with one `add` call, and it is passed down from
/// there. There is no global registry and no static registration.

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace milesrt::rl {

template <typename T>
class registry {
 public:
  using factory = std::function<std::unique_ptr<T>()>;

  /// `what` names the extension point in error messages ("policy loss", "estimator").
  explicit registry(std::string what) : what_(std::move(what)) {}

  /// Registers `name`; an empty name, a null factory or a name already taken throws
  /// std::invalid_argument.
  void add(const std::string& name, factory make) {
    if (name.empty() || !make)
      throw std::invalid_argument(what_ + ": a name and a factory are required");
    if (!factories_.emplace(name, std::move(make)).second) {
      throw std::invalid_argument(what_ + " '" + name + "' is registered twice");
    }
  }

  bool contains(const std::string& name) const { return factories_.count(name) != 0; }

  /// The registered names, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : factories_) out.push_back(entry.first);
    return out;
  }

  /// "" when `name` is registered, else "'<name>' is not one of: <the names, sorted>".
  std::string check(const std::string& name) const {
    if (contains(name)) return "";
    std::string known;
    for (const auto& entry : factories_) known += (known.empty() ? "" : ", ") + entry.first;
    return "'" + name + "' is not one of: " + known;
  }

  /// A new instance of `name`, or nullptr when it is not registered.
  std::unique_ptr<T> try_make(const std::string& name) const {
    auto it = factories_.find(name);
    return it == factories_.end() ? nullptr : it->second();
  }

  /// A new instance of `name`; an unknown name throws std::invalid_argument naming the known ones.
  std::unique_ptr<T> make(const std::string& name) const {
    auto it = factories_.find(name);
    if (it == factories_.end()) throw std::invalid_argument(what_ + " " + check(name));
    return it->second();
  }

 private:
  std::string what_;
  std::map<std::string, factory> factories_;
};

}  // namespace milesrt::rl
