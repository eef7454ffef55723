#pragma once
/// The messages of the weight path:
///   trainer.weights (port type "llm.trained_weights", a weights_ref) -> publisher.weights
///   publisher.updates (port type "llm.weights", a weights_update)    -> rollout.weights

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/messages.hpp"

namespace milesrt::weights {

/// The port types of the weight path.
namespace port_type {
inline constexpr const char* trained_weights = "llm.trained_weights";  ///< a weights_ref
inline constexpr const char* weights = "llm.weights";                  ///< a weights_update
}  // namespace port_type

/// A trainer's announcement of a version (made by local_versions::announce): its weights are in
/// the trainer's process's local_versions, under the trainer's name and this version.
struct weights_ref {
  uint64_t version = 0;
  std::string channel;           ///< the trainer's name
  int64_t pid = 0;               ///< the trainer's process
  std::vector<uint64_t> hashes;  ///< xxh3 of each tensor, in parameter order (verifyWeights)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weights_ref& x) {
  return f(caf::meta::type_name("weights_ref"), x.version, x.channel, x.pid, x.hashes);
}

/// One published version, as an engine receives it.
struct weights_update {
  uint64_t version = 0;
  std::string transport;  ///< colocated | ipc | broadcast | p2p | disk_delta
  std::string channel;    ///< the trainer's name (colocated: where local_versions has its weights)
  bool share = false;  ///< colocated, handover = share: use the trainer's buffer itself (no copy);
                       ///< else the kept copy of this version
  std::string location;          ///< ipc: shared-memory name; disk_delta: the directory
  int64_t pid = 0;               ///< the publishing process
  std::vector<uint64_t> hashes;  ///< per tensor; empty = do not verify
  caf::actor publisher;          ///< asked for a full copy when a delta cannot be applied
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weights_update& x) {
  return f(caf::meta::type_name("weights_update"), x.version, x.transport, x.channel, x.share,
           x.location, x.pid, x.hashes, x.publisher);
}

/// Engine -> publisher: the delta of this version could not be applied; write a full copy.
/// (version) -> the directory the full copy is in.
using fullcopy_atom = caf::atom_constant<caf::atom("fullcopy")>;

}  // namespace milesrt::weights

CAF_BEGIN_TYPE_ID_BLOCK(milesrt_weights, caf::first_custom_type_id + 200)
CAF_ADD_TYPE_ID(milesrt_weights, (milesrt::weights::weights_ref))
CAF_ADD_TYPE_ID(milesrt_weights, (milesrt::weights::weights_update))
CAF_END_TYPE_ID_BLOCK(milesrt_weights)
