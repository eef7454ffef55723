#pragma once
/// The paged-KV allocator and the radix-tree prefix cache over its blocks (on the LLM core's
/// kv_cache interface: a block holds block_size consecutive tokens of one sequence).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace milesrt::serving {

/// Reference-counted KV blocks within a fixed budget.
class block_allocator {
 public:
  explicit block_allocator(int64_t num_blocks);
  /// A free block with one reference, or nullopt when the budget is spent.
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  /// Drops a reference; the block is free again at zero.
  void release(int32_t block);
  int32_t refs(int32_t block) const { return refs_[block]; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_blocks() const { return static_cast<int64_t>(refs_.size()); }
  /// Blocks handed out by allocate() since the start (a count the tests use).
  uint64_t allocations() const { return allocations_; }

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
  uint64_t allocations_ = 0;
};

/// A radix tree keyed by the tokens of whole blocks. The cache holds one reference on every block
/// in it; blocks only the cache holds are evicted least recently used first.
class radix_cache {
 public:
  radix_cache(block_allocator& blocks, int64_t block_size);
  /// The cached blocks covering the longest whole-block prefix of tokens[0..limit); each returned
  /// block gets a reference for the caller. Counts a lookup, and a hit per block.
  std::vector<int32_t> match(const std::vector<int64_t>& tokens, int64_t limit);
  /// Adds the whole blocks of `tokens` (held in `table`) to the tree; blocks already present keep
  /// their cached copy.
  void insert(const std::vector<int64_t>& tokens, const std::vector<int32_t>& table);
  /// Frees up to `n` blocks that only the cache holds, least recently used leaves first; returns
  /// how many it freed.
  int64_t evict(int64_t n);
  /// Drops everything (after a weight update the cached KV is stale).
  void flush();
  int64_t cached_blocks() const { return cached_; }
  uint64_t lookups_blocks() const { return looked_up_; }
  uint64_t hit_blocks() const { return hits_; }

 private:
  struct node {
    int32_t block = -1;
    uint64_t last_used = 0;
    node* parent = nullptr;
    std::map<std::vector<int64_t>, std::unique_ptr<node>> children;
  };
  block_allocator& blocks_;
  int64_t block_size_;
  node root_;
  uint64_t clock_ = 0;
  int64_t cached_ = 0;
  uint64_t looked_up_ = 0, hits_ = 0;
};

}  // namespace milesrt::serving
