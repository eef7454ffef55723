#pragma once
/// The typed CAF interfaces of the four roles. A kind's factory spawns an actor of one of these
/// and returns it as caf::actor; the driver sends exactly these requests, each with a deadline.

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "runtime/core/messages.hpp"

namespace milesrt::runtime {

/// Every actor can be checkpointed: snapshot(dir) -> state, restore(dir, state) -> accepted.
using checkpointable_actor =
    caf::typed_actor<caf::replies_to<snapshot_atom, std::string>::with<actor_state>,
                     caf::replies_to<restore_atom, std::string, actor_state>::with<bool>>;

/// A source emits up to `count` new items (fewer means it has run out).
using source_actor =
    checkpointable_actor::extend<caf::replies_to<produce_atom, uint64_t>::with<node_reply>>;

/// A stage answers each item arriving on an input port with the items it emits (maybe none).
using stage_actor = checkpointable_actor::extend<
    caf::replies_to<process_atom, std::string, envelope>::with<node_reply>>;

/// A learner trains on a batch (step number, items) and returns its new version.
using learner_actor = checkpointable_actor::extend<
    caf::replies_to<train_atom, uint64_t, std::vector<envelope>>::with<train_reply>>;

/// A buffer holds the items bound for the learner: `put` (port, item, the learner's version) keeps
/// or discards one; `take` (count, the learner's version, discard the rest, drop_past) first
/// discards every item staler than drop_past (the schedule's bound when it drops stale work;
/// UINT64_MAX: none), then hands out a batch of `count` items, or none when too few are fit to
/// train.
using buffer_actor = checkpointable_actor::extend<
    caf::replies_to<put_atom, std::string, envelope, uint64_t>::with<buffer_reply>,
    caf::replies_to<take_atom, uint64_t, uint64_t, bool, uint64_t>::with<buffer_reply>>;

}  // namespace milesrt::runtime
