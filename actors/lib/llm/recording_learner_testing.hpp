#pragma once
// For tests of kinds that emit sample groups (session_server, environment): a learner kind that
// keeps every batch's groups and answers each `train` with the next version, so a graph of the
// kind under test runs under the real driver without a trainer. Test-only; it lives beside the
// messages (not under test/) because tests under actors/ include no test/ headers.
#include <caf/all.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::llm::testing {

/// What the learner received, in order.
struct recorded_groups {
  std::mutex m;
  std::vector<sample_group> groups;
};

/// Adds the learner kind `name` (role learner, input port `groups`) recording into `log`.
inline void add_recording_learner(runtime::kind_registry& kinds, const std::string& name,
                                  std::shared_ptr<recorded_groups> log) {
  using namespace milesrt::runtime;
  kind_descriptor learner;
  learner.name = name;
  learner.role = role::learner;
  learner.inputs = {{"groups", port_type::scored_group, ""}};
  learner.spawn = [log](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([log](caf::stateful_actor<uint64_t>* self) -> caf::behavior {
      return {
          [=](train_atom, uint64_t, const std::vector<envelope>& batch) {
            std::lock_guard<std::mutex> lock(log->m);
            for (const auto& e : batch) log->groups.push_back(e.payload.get_as<sample_group>(0));
            train_reply r;
            r.version = ++self->state;
            return r;
          },
          [=](snapshot_atom, const std::string&) { return actor_state{}; },
          [=](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(learner);
}

}  // namespace milesrt::llm::testing
