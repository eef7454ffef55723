#pragma once
/// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) in C++: encode gives the ids
/// HF `tokenizers` gives, decode the text it gives. Immutable after loading; share it freely
/// between threads.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/bpe.hpp"
#include "actors/lib/llm/tokenizer/pipeline.hpp"

namespace milesrt::llm {

/// One entry of tokenizer.json's "added_tokens".
struct added_token {
  token_id id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
  std::string decoded;  ///< What decode writes: the normalized content when `normalized`, as in HF.
};

class tokenizer;

/// Which BOS/EOS a prompt given as text gets (`--bos`, the rollout's `bos` parameter). Chat
/// prompts get none of these: their template writes the special tokens, as apply_chat_template
/// tokenizes with add_special_tokens=False.
enum class bos_policy {
  /// "auto": the convention of the model's tokenizer class, as transformers 4 applied it (and the
  /// models were trained with): the Llama-family classes (LlamaTokenizer[Fast], CodeLlamaTokenizer
  /// [Fast], GemmaTokenizer[Fast], e.g. DeepSeek-V3) add BOS unless add_bos_token is false and EOS
  /// when add_eos_token is true; every other class gets what tokenizer.json's post_processor adds.
  model,
  /// "config": tokenizer_config.json's add_bos_token / add_eos_token, whatever the class: a flag
  /// that is set adds (true) or leaves out (false) its token; one that is absent leaves it to
  /// tokenizer.json's post_processor.
  config,
  /// "never": no special token is added.
  never,
};
/// "auto", "config" or "never".
std::optional<bos_policy> parse_bos_policy(std::string_view word);

/// What `tokenizer::load` returns: the tokenizer, or one line naming the file and component at
/// fault.
struct tokenizer_load_result {
  std::shared_ptr<const tokenizer> tok;
  std::string error;
};

class tokenizer {
 public:
  /// Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static tokenizer_load_result load(const std::filesystem::path& dir);

  /// Token ids of `text`. Invalid UTF-8 is first repaired (each maximal invalid subpart becomes
  /// U+FFFD, as Python's decode(errors="replace")). With `add_special_tokens`, the post-processor
  /// adds BOS/EOS as tokenizer.json's post_processor says; tokenizer_config.json's add_bos_token /
  /// add_eos_token are ignored, as transformers 5's AutoTokenizer ignores them.
  std::vector<token_id> encode(std::string_view text, bool add_special_tokens = false) const;

  /// Token ids of a prompt given as text, with the BOS/EOS `policy` adds (see bos_policy).
  std::vector<token_id> encode_prompt(std::string_view text, bos_policy policy) const;

  /// Text of `ids`; unknown ids are skipped, as HF does. Invalid UTF-8 from byte-level tokens
  /// becomes U+FFFD.
  std::string decode(const std::vector<token_id>& ids, bool skip_special_tokens = false) const;

  /// The id of a token (added tokens first, then the model's vocabulary), or -1.
  token_id token_to_id(std::string_view token) const;
  /// The string of a token id, or nullptr.
  const std::string* id_to_token(token_id id) const;
  /// True when `id` is a special added token.
  bool is_special(token_id id) const;

  /// tokenizer_config.json's bos_token / eos_token (a string or an AddedToken object's "content";
  /// "" when absent or null) and its chat_template (a string, or the "default" entry of the named
  /// list form; "" when absent).
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  const std::string& chat_template() const { return chat_template_; }
  /// The special tokens tokenizer_config.json names (bos_token, eos_token, unk_token, pad_token,
  /// sep_token, cls_token, mask_token), as (name, text): the variables a chat template sees.
  const std::vector<std::pair<std::string, std::string>>& special_tokens() const {
    return special_tokens_;
  }
  const std::filesystem::path& dir() const { return dir_; }

  /// Internal: use `load`.
  tokenizer(const std::filesystem::path& dir, const nlohmann::json& tj, const nlohmann::json* cfg);

 private:
  struct trie {
    struct node {
      std::vector<std::pair<unsigned char, int>> next;
      int token = -1;  // index into added_
    };
    std::vector<node> nodes{1};
    void insert(const std::string& s, int token);
    // Leftmost-longest match starting at `at`: (length, token index) or (0, -1).
    std::pair<size_t, int> longest(std::string_view s, size_t at) const;
    bool empty() const { return nodes.size() == 1; }
  };
  struct piece {
    std::string text;
    int added = -1;  // index into added_, or -1 for text still to tokenize
  };
  void split_added(const std::string& text, const trie& t, std::vector<piece>& out) const;
  /// tokenizer.json's added_tokens (`list`), and the tries that find them in text.
  void read_added_tokens(const nlohmann::json& list);
  /// tokenizer_config.json's settings: BOS/EOS flags, the class, special tokens, chat template.
  void read_config(const nlohmann::json& cfg);

  std::filesystem::path dir_;
  std::unique_ptr<normalizer> normalizer_;
  std::unique_ptr<pre_tokenizer> pre_tokenizer_;
  std::unique_ptr<bpe_model> model_;
  std::unique_ptr<post_processor> post_processor_;
  std::unique_ptr<token_decoder> decoder_;
  std::vector<added_token> added_;
  std::unordered_map<std::string, int> added_by_content_;
  std::unordered_map<token_id, int> added_by_id_;
  std::unordered_set<std::string> special_contents_;
  trie raw_trie_, normalized_trie_;
  std::string bos_token_, eos_token_, chat_template_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
  std::optional<bool> add_bos_token_, add_eos_token_;  // tokenizer_config.json's flags, when set
  std::string tokenizer_class_;
};

}  // namespace milesrt::llm
