#pragma once
/// The rollout actor's interface and state (rollout_kind.cpp): the groups and service calls it
/// has open, the engine, and the totals its replies report.

#include <caf/all.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/serving/engine.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::rollout {

using rstep_atom = caf::atom_constant<caf::atom("rstep")>;

/// The stage interface plus the engine's own step messages and the generation service
/// (serving/generate_messages.hpp) it serves on its `generate` port.
using rollout_actor = runtime::stage_actor::extend<
    caf::reacts_to<rstep_atom>,
    caf::replies_to<serving::generate_atom,
                    serving::generation_request>::with<serving::generation_result>>;

struct pending_group {
  caf::typed_response_promise<runtime::node_reply> promise;
  uint64_t group_id = 0;
  std::string label;
  /// By sample index, whatever order they finish in (that order depends on the engine's batches,
  /// so on when prompts arrived: on timing); `received` of them are in.
  std::vector<llm::sample_msg> samples;
  int64_t received = 0;
  serving::sampling_params
      params;  ///< what its samples were asked with (a resumed sample goes on with it)
};

/// A request of the generation service: the caller's answer, and what it is sampled with.
struct pending_call {
  caf::typed_response_promise<serving::generation_result> promise;
  serving::sampling_params params;
  /// Streaming: the requester, its stream id (0: none) and the tokens it has been sent.
  caf::strong_actor_ptr to;
  uint64_t stream_id = 0;
  size_t sent = 0;
};

struct rollout_state {
  std::shared_ptr<llm::decoder> model;
  std::shared_ptr<llm::text_codec> codec;  ///< null without tokenizer.json: prompts must be ids
  std::unique_ptr<serving::engine> eng;
  serving::sampling_params base;
  serving::pause_mode mode = serving::pause_mode::retract;
  bool resume_aborted =
      false;  ///< pauseMode abort: resume the samples cut off, or drop their groups
  /// Totals since the start (reported in abort mode): samples an update cut off, groups dropped
  /// for it, samples resumed.
  uint64_t aborted_samples = 0, dropped_groups = 0, resumed_samples = 0;
  std::map<uint64_t, pending_group> groups;  // engine request id -> group
  /// Requests of the generation service by engine request id.
  std::map<uint64_t, pending_call> calls;
  std::shared_ptr<weights::local_versions>
      versions;                ///< this process's trainers (colocated publishing)
  weights::receiver receiver;  ///< what this engine holds of the published versions
  uint64_t next_request = 1;
  bool stepping = false;
  double busy_seconds = 0;            ///< time spent in engine steps since the start
  bool release_kv_when_idle = false;  ///< colocated: the KV pool goes back between rollout phases
  double retake_seconds = -1;         ///< the last retake of the KV pool (and its graphs), if any
};

}  // namespace milesrt::rollout
