#pragma once
/// Objects shared by the actors of one process, one per type: e.g. a library's registry of what a
/// learner in this process has produced, which a stage in the same process reads without a copy.
/// The runtime makes one store per process and run and hands it to every factory (no global
/// registry); the libraries own the types, so nothing is looked up under a string key.

#include <map>
#include <memory>
#include <mutex>
#include <typeindex>

namespace milesrt::runtime {

class process_store {
 public:
  /// The process's object of type T, default-constructed by the first caller; every later call
  /// (from any actor of the process) returns the same object. T does its own locking.
  template <class T>
  std::shared_ptr<T> get_or_make() {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = objects_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return std::static_pointer_cast<T>(slot);
  }

 private:
  std::mutex mutex_;
  std::map<std::type_index, std::shared_ptr<void>> objects_;
};

}  // namespace milesrt::runtime
