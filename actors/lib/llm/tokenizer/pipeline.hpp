#pragma once
/// The stages around the BPE model in a Hugging Face tokenizer.json: normalizer, pre-tokenizer,
/// post-processor and decoder, each read from its JSON and applied to plain strings (milesrt needs
/// ids, not offsets). A component milesrt does not implement is an error that names it.

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "actors/lib/llm/tokenizer/bpe.hpp"
#include "actors/lib/llm/tokenizer/regex.hpp"

namespace milesrt::llm {

/// A normalizer: NFC/NFD/NFKC/NFKD (through ICU), Lowercase, Prepend, Replace, Sequence.
class normalizer {
 public:
  /// `j` is tokenizer.json's "normalizer" value (null means none).
  explicit normalizer(const nlohmann::json& j);
  ~normalizer();
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string s) const;

  struct step;

 private:
  void add(const nlohmann::json& j);
  std::vector<std::unique_ptr<step>> steps_;
};

/// A pre-tokenizer: Split (Regex or String pattern, every behavior, invert), ByteLevel (with or
/// without GPT-2's regex, add_prefix_space), Digits, Sequence.
class pre_tokenizer {
 public:
  explicit pre_tokenizer(const nlohmann::json& j);
  ~pre_tokenizer();
  /// Splits `text` into the words the model encodes, appending them to `out`.
  void apply(const std::string& text, std::vector<std::string>& out) const;

  struct step;

 private:
  void add(const nlohmann::json& j);
  std::vector<std::unique_ptr<step>> steps_;
};

/// A post-processor: TemplateProcessing, RobertaProcessing/BertProcessing, ByteLevel (offsets
/// only, so nothing for ids), Sequence. `vocab_find` resolves Roberta/Bert token names.
class post_processor {
 public:
  explicit post_processor(const nlohmann::json& j);
  /// Wraps `ids` of a single sequence in the special tokens the template adds.
  std::vector<token_id> apply(const std::vector<token_id>& ids) const;
  /// What apply puts before and after a single sequence.
  const std::vector<token_id>& prefix() const { return prefix_; }
  const std::vector<token_id>& suffix() const { return suffix_; }

 private:
  void add(const nlohmann::json& j);
  std::vector<token_id> prefix_, suffix_;
};

/// tokenizer.json's "decoder" (token_decoder, as model.hpp's `decoder` is the LLM): ByteLevel,
/// ByteFallback, Fuse, Replace (String), Strip, Sequence; or none, which joins
/// tokens with spaces as HF does.
class token_decoder {
 public:
  explicit token_decoder(const nlohmann::json& j);
  ~token_decoder();
  std::string apply(std::vector<std::string> tokens) const;

  struct step;

 private:
  void add(const nlohmann::json& j);
  std::vector<std::unique_ptr<step>> steps_;
  bool none_ = true;
};

}  // namespace milesrt::llm
