#pragma once
/// The BPE model of a Hugging Face tokenizer.json: vocabulary, ranked merges, byte fallback and
/// ignore_merges, applied to one pre-tokenized word. Immutable after construction, apart from a
/// word cache that each thread keeps for itself (so encode is safe from any number of threads).

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace milesrt::llm {

using token_id = int32_t;

class bpe_model {
 public:
  /// Reads `"model": {"type": "BPE", ...}`. Merges may be "a b" strings or ["a", "b"] pairs.
  /// Throws std::invalid_argument naming the field when the model is malformed or unsupported.
  explicit bpe_model(const nlohmann::json& model);
  ~bpe_model();

  /// Appends the ids of one word (already in the model's alphabet, e.g. byte-level characters).
  /// Words seen before on the calling thread come from its cache (`word_cache_capacity` words of
  /// at most `word_cache_max_bytes` bytes; the cache starts over when full), as HF's BPE caches.
  void encode_word(std::string_view word, std::vector<token_id>& out) const;
  static constexpr size_t word_cache_capacity = 16384;
  static constexpr size_t word_cache_max_bytes = 256;

  /// The id of `token` in the vocabulary, or -1.
  token_id find(std::string_view token) const;
  /// The token string of `id`, or nullptr when the vocabulary has no such id.
  const std::string* token(token_id id) const;
  /// One past the largest id in the vocabulary.
  size_t size() const { return tokens_.size(); }

 private:
  struct merge {
    uint32_t rank;
    token_id result;
  };
  static uint64_t pair_key(token_id a, token_id b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_all(std::vector<token_id>& symbols) const;
  void encode_uncached(std::string_view word, std::vector<token_id>& out) const;

  struct word_caches;  // one per thread; bpe.cpp
  std::unique_ptr<word_caches> caches_;

  std::unordered_map<std::string, token_id> vocab_;
  std::vector<std::string> tokens_;  // by id; empty where the vocabulary has a gap
  std::vector<bool> present_;
  std::unordered_map<uint64_t, merge> merges_;
  token_id unk_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
};

}  // namespace milesrt::llm
