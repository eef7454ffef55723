#include "actors/lib/serving/kv_blocks.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace milesrt::serving {

block_allocator::block_allocator(int64_t num_blocks) : refs_(num_blocks, 0) {
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> block_allocator::allocate() {
  if (free_.empty()) return std::nullopt;
  int32_t b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  ++allocations_;
  return b;
}

void block_allocator::retain(int32_t block) {
  if (refs_.at(block) <= 0) throw std::logic_error("retain of a free KV block");
  ++refs_[block];
}

void block_allocator::release(int32_t block) {
  if (refs_.at(block) <= 0) throw std::logic_error("release of a free KV block");
  if (--refs_[block] == 0) free_.push_back(block);
}

radix_cache::radix_cache(block_allocator& blocks, int64_t block_size)
    : blocks_(blocks), block_size_(block_size) {}

std::vector<int32_t> radix_cache::match(const std::vector<int64_t>& tokens, int64_t limit) {
  std::vector<int32_t> out;
  node* at = &root_;
  const int64_t whole = std::min<int64_t>(limit, tokens.size()) / block_size_;
  looked_up_ += whole;
  ++clock_;
  for (int64_t b = 0; b < whole; ++b) {
    std::vector<int64_t> key(tokens.begin() + b * block_size_,
                             tokens.begin() + (b + 1) * block_size_);
    auto it = at->children.find(key);
    if (it == at->children.end()) break;
    at = it->second.get();
    at->last_used = clock_;
    blocks_.retain(at->block);
    out.push_back(at->block);
  }
  hits_ += out.size();
  return out;
}

void radix_cache::insert(const std::vector<int64_t>& tokens, const std::vector<int32_t>& table) {
  node* at = &root_;
  ++clock_;
  const int64_t whole = std::min<int64_t>(tokens.size() / block_size_, table.size());
  for (int64_t b = 0; b < whole; ++b) {
    std::vector<int64_t> key(tokens.begin() + b * block_size_,
                             tokens.begin() + (b + 1) * block_size_);
    auto it = at->children.find(key);
    if (it == at->children.end()) {
      auto n = std::make_unique<node>();
      n->block = table[b];
      n->parent = at;
      blocks_.retain(table[b]);
      ++cached_;
      it = at->children.emplace(std::move(key), std::move(n)).first;
    }
    at = it->second.get();
    at->last_used = clock_;
  }
}

int64_t radix_cache::evict(int64_t n) {
  int64_t freed = 0;
  while (freed < n) {
    // The least recently used leaf whose block nobody but the cache holds.
    node* victim = nullptr;
    std::function<void(node*)> visit = [&](node* x) {
      for (auto& [k, c] : x->children) {
        if (c->children.empty()) {
          if (blocks_.refs(c->block) == 1 && (!victim || c->last_used < victim->last_used))
            victim = c.get();
        } else {
          visit(c.get());
        }
      }
    };
    visit(&root_);
    if (!victim) break;
    blocks_.release(victim->block);
    --cached_;
    auto* parent = victim->parent;
    for (auto it = parent->children.begin(); it != parent->children.end(); ++it) {
      if (it->second.get() == victim) {
        parent->children.erase(it);
        break;
      }
    }
    ++freed;
  }
  return freed;
}

void radix_cache::flush() {
  std::function<void(node*)> drop = [&](node* x) {
    for (auto& [k, c] : x->children) {
      drop(c.get());
      blocks_.release(c->block);
      --cached_;
    }
    x->children.clear();
  };
  drop(&root_);
}

}  // namespace milesrt::serving
