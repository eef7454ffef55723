#pragma once
/// Objects shared by the actors of one process, e.g. a learner's parameters that a stage in the
/// same process reads without a copy. The runtime makes one store per process and run and hands it to
/// every factory (no global registry); kinds choose the keys.

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <typeindex>
#include <utility>

namespace milesrt::runtime {

class process_store {
 public:
  /// Stores `value` under `key`, replacing what was there.
  template <class T>
  void put(const std::string& key, std::shared_ptr<T> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.insert_or_assign(key, std::make_pair(std::type_index(typeid(T)), std::shared_ptr<void>(std::move(value))));
  }
  /// Removes the object under `key` (its holders keep it alive); nothing when there is none.
  void erase(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.erase(key);
  }
  /// The object under `key`, or null when there is none; throws when it has another type.
  template <class T>
  std::shared_ptr<T> get(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    if (it->second.first != std::type_index(typeid(T))) {
      throw std::logic_error("process store: '" + key + "' holds another type");
    }
    return std::static_pointer_cast<T>(it->second.second);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<std::type_index, std::shared_ptr<void>>> objects_;
};

}  // namespace milesrt::runtime
