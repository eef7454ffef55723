#pragma once
/// The engine's scheduler: the waiting and running sequences, admission and batching within a
/// per-step token budget (chunked prefill), the paged-KV blocks with preemption and the radix
/// prefix cache, and the bookkeeping of a step's results (tokens appended, stops, finished
/// samples).

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/engine_types.hpp"
#include "actors/lib/serving/kv_blocks.hpp"
#include "actors/lib/serving/sequence.hpp"

namespace milesrt::serving {

class scheduler {
 public:
  /// `config.num_blocks` is the resolved number of KV blocks.
  explicit scheduler(const engine_config& config);

  /// Queues the n samples of `r` (checked by the engine), each with its own random stream.
  void add(const generate_request& r);
  /// Queues `cut` (checked by the engine) to go on with `params`.
  void resume(const sample& cut, const sampling_params& params);
  bool idle() const { return running_.empty() && waiting_.empty(); }
  /// Whether sequences wait while none runs (after an empty plan: none fits the free KV blocks).
  bool stuck() const { return !waiting_.empty() && running_.empty(); }

  /// The step's plan, and the segments of its packed forward: the running sequences' chunks within
  /// the budget, oldest first, preempting the newest when blocks run out; then waiting sequences
  /// join while the budget and blocks last.
  step_plan schedule(std::vector<llm::segment>& segments);
  /// The entries of `plan` (a decode step) that go on in the step after it (they have not reached
  /// their length), each with a KV block for its next token; empty when the blocks run out.
  std::vector<size_t> reserve_next_decode(const step_plan& plan);
  /// A step's results: each planned sequence's computed chunk, its next token where its chunk
  /// reached the end (sampled under `version`); returns the samples that finished (and drops them).
  std::vector<sample> update(const step_plan& plan, const step_output& out, uint64_t version);

  /// Every sequence, running or waiting, ended with finish_reason "abort" and dropped.
  std::vector<sample> abort_all();
  /// The running sequences requeued in front of the waiting ones with their tokens, their KV
  /// dropped (to be computed again).
  void retract_all();
  /// Drops the prefix cache (its KV belongs to old weights).
  void flush_prefix() { prefix_.flush(); }

  /// See engine::output_since.
  sample output_since(uint64_t id, size_t from) const;
  /// The counters but `steps`, and the queue, block and cache gauges.
  engine_stats stats() const;
  block_allocator& blocks() { return blocks_; }
  const block_allocator& blocks() const { return blocks_; }

 private:
  std::vector<int64_t> schedule_running(int64_t& budget);
  void admit_waiting(std::vector<int64_t>& chunk, int64_t& budget);
  /// Records the computed chunk of plan entry `k`, `n` tokens at packed row `row`: counters, MoE
  /// routing (of the eager forward, or the decode graphs' own), the prompt blocks a first sample
  /// shares.
  void computed_chunk(sequence& s, int64_t n, int64_t row, const step_output& out, size_t k);
  /// Appends `drawn` to `s` under `version`; "stop" or "length" when `s` finished with it, else
  /// nullptr.
  const char* append_token(sequence& s, const device_sample_result& drawn, uint64_t version);
  bool ensure_blocks(sequence& s, int64_t upto);
  void free_sequence(sequence& s, bool cache_blocks);
  void preempt(size_t index);

  engine_config config_;
  block_allocator blocks_;
  radix_cache prefix_;
  std::vector<sequence> running_;
  std::deque<sequence> waiting_;
  uint64_t arrivals_ = 0;
  engine_stats stats_;
  std::map<uint64_t, int64_t> prompt_done_;  ///< leader arrival -> whether its prompt is cached
};

}  // namespace milesrt::serving
