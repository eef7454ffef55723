#pragma once
/// The weights of the trainers of one process, by trainer name: each trainer's own parameters
/// (which it trains in place) and the immutable copies of the versions it announced, when a
/// publisher of the process publishes copies (publisher.handover = copy). One object per process,
/// taken from the process store by its type: `store.get_or_make<weights::local_versions>()`.
///
/// Why the trainer's side takes the copy: the schedule may start the trainer's next step as soon
/// as the trainer has answered, before the publisher (or a colocated engine) sees the version.
/// announce() runs inside the trainer's answer, so the copy is complete before the trainer's
/// weights can change again; whether a copy is taken is the publishers' decision, registered
/// here at their spawn (keep_copies), before any step runs.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/messages.hpp"

namespace milesrt::weights {

class local_versions {
 public:
  /// A trainer's own parameters, at its spawn (a second call replaces the first).
  void add_trainer(const std::string& trainer, std::shared_ptr<llm::flat_params> live);

  /// A publisher that publishes immutable copies, at its spawn: from now on every version a
  /// trainer of this process announces is copied, and the newest `keep` copies of each trainer
  /// are kept (the most any publisher of the process asked for; at least 1).
  void keep_copies(uint32_t keep);

  /// The trainer, when version `version` is complete and before its weights change again:
  /// records the version and, when a publisher asked for copies, freezes one (on the weights'
  /// device, in their dtype) and drops the copies beyond the kept count. Returns the weights_ref
  /// that announces the version. Throws std::runtime_error naming the trainer when it was not
  /// added, or when the copy fails.
  weights_ref announce(const std::string& trainer, uint64_t version);

  /// The trainer's own parameters, or null when no trainer of that name is in this process.
  std::shared_ptr<llm::flat_params> live(const std::string& trainer) const;
  /// The immutable copy of `version`, or null when none is kept.
  std::shared_ptr<llm::flat_params> frozen(const std::string& trainer, uint64_t version) const;
  /// The last version the trainer announced (0 before the first).
  uint64_t latest(const std::string& trainer) const;
  /// How many copies are kept per trainer (0: no publisher asked for copies).
  uint32_t copies_kept() const;
  /// The versions kept as copies, for messages: "3..6", or "none".
  std::string kept_range(const std::string& trainer) const;

 private:
  struct trainer_versions {
    std::shared_ptr<llm::flat_params> live;
    uint64_t latest = 0;
    std::map<uint64_t, std::shared_ptr<llm::flat_params>> frozen;
  };
  mutable std::mutex mutex_;
  std::map<std::string, trainer_versions> trainers_;
  uint32_t keep_ = 0;
};

}  // namespace milesrt::weights
