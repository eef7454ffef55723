#pragma once
/// Who sends what to whom when trainer ranks hand new weights to engine ranks (the broadcast and
/// p2p transports). Pure planning over element ranges, no communication: tested on the CPU.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace milesrt::weights {

/// A range of one tensor held by one rank, in elements of the flattened tensor.
struct shard {
  std::string tensor;
  int rank = 0;
  int64_t offset = 0;
  int64_t length = 0;
};

/// One copy: `length` elements of `tensor` from trainer `src_rank` to engine `dst_rank`.
/// `src_offset` counts from the start of the source's shard (the owned range it is taken from),
/// `dst_offset` from the start of the destination's needed range.
struct transfer {
  int src_rank = 0;
  int dst_rank = 0;
  std::string tensor;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t length = 0;
};

/// Covers each needed range exactly once with ranges that trainer ranks own, split where
/// ownership splits. Where several trainers own a piece (data-parallel replicas), the trainer
/// rank equal to dst_rank mod the trainer count is preferred, else the next one after it, so
/// engines spread over trainers. Transfers come per needed range, in offset order. Throws
/// std::invalid_argument naming the tensor and range when a needed range is not owned (or a
/// range is empty or negative).
std::vector<transfer> plan_p2p(const std::vector<shard>& owned_by_trainers,
                               const std::vector<shard>& needed_by_engines);

/// Tensors grouped for one collective call each.
struct bucket {
  std::vector<std::pair<std::string, int64_t>> tensors;  ///< name and bytes
  int64_t bytes = 0;
};

/// Groups tensors (name, bytes), in order, into buckets of at most `bucket_bytes`, never
/// splitting a tensor: one bigger than a bucket gets a bucket of its own.
std::vector<bucket> make_buckets(const std::vector<std::pair<std::string, int64_t>>& tensors,
                                 int64_t bucket_bytes);

/// The p2p plan of a trainer that is one rank (rank 0, owning every tensor whole) and `engines`
/// engine ranks (1..engines) that each need every tensor whole: one transfer per tensor and
/// engine. `tensors` are (name, elements) in the flat buffer's order.
std::vector<transfer> plan_whole_model(const std::vector<std::pair<std::string, int64_t>>& tensors,
                                       int engines);

}  // namespace milesrt::weights
