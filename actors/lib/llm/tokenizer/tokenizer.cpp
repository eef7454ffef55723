#include "actors/lib/llm/tokenizer/tokenizer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "actors/lib/llm/tokenizer/regex.hpp"
#include "actors/lib/llm/tokenizer/utf8.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace {

// HF's rules for added tokens use the Rust regex crate's Unicode \w and \s.
const regex& word_end() {
  static const regex re("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]$");
  return re;
}
const regex& word_start() {
  static const regex re("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]");
  return re;
}
const regex& spaces_at_end() {
  static const regex re("\\p{White_Space}*$");
  return re;
}
const regex& spaces_at_start() {
  static const regex re("^\\p{White_Space}*");
  return re;
}

std::string token_text(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return {};
}

nlohmann::json read_json(const std::filesystem::path& p) {
  // A FIFO would block the open; a folder would read as nothing.
  if (auto problem = runtime::regular_file_problem(p); !problem.empty())
    throw std::invalid_argument(problem == "no such file" ? "cannot open" : problem);
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (auto deep = runtime::json_nesting_problem(ss.str()); !deep.empty())
    throw std::invalid_argument(deep);
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    const std::string m = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    const auto tag = m.find("] ");
    throw std::invalid_argument("not valid JSON: " +
                                (tag == std::string::npos ? m : m.substr(tag + 2)));
  }
}

}  // namespace

void tokenizer::trie::insert(const std::string& s, int token) {
  int n = 0;
  for (unsigned char c : s) {
    int child = -1;
    for (auto [b, k] : nodes[static_cast<size_t>(n)].next) {
      if (b == c) child = k;
    }
    if (child < 0) {
      child = static_cast<int>(nodes.size());
      nodes[static_cast<size_t>(n)].next.emplace_back(c, child);
      nodes.emplace_back();
    }
    n = child;
  }
  nodes[static_cast<size_t>(n)].token = token;
}

std::pair<size_t, int> tokenizer::trie::longest(std::string_view s, size_t at) const {
  std::pair<size_t, int> best{0, -1};
  int n = 0;
  for (size_t i = at; i < s.size(); ++i) {
    int child = -1;
    for (auto [b, k] : nodes[static_cast<size_t>(n)].next) {
      if (b == static_cast<unsigned char>(s[i])) child = k;
    }
    if (child < 0) break;
    n = child;
    if (nodes[static_cast<size_t>(n)].token >= 0)
      best = {i + 1 - at, nodes[static_cast<size_t>(n)].token};
  }
  return best;
}

tokenizer_load_result tokenizer::load(const std::filesystem::path& dir) {
  auto tj_path = dir / "tokenizer.json";
  auto cfg_path = dir / "tokenizer_config.json";
  nlohmann::json tj, cfg;
  try {
    tj = read_json(tj_path);
  } catch (const std::exception& e) {
    return {nullptr, tj_path.string() + ": " + e.what()};
  }
  bool has_cfg = std::filesystem::exists(cfg_path);
  if (has_cfg) {
    try {
      cfg = read_json(cfg_path);
    } catch (const std::exception& e) {
      return {nullptr, cfg_path.string() + ": " + e.what()};
    }
  }
  try {
    return {std::make_shared<tokenizer>(dir, tj, has_cfg ? &cfg : nullptr), {}};
  } catch (const std::exception& e) {
    return {nullptr, tj_path.string() + ": " + e.what()};
  }
}

tokenizer::tokenizer(const std::filesystem::path& dir, const nlohmann::json& tj,
                     const nlohmann::json* cfg)
    : dir_(dir) {
  auto component = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null;
    auto it = tj.find(key);
    return it == tj.end() ? null : *it;
  };
  auto guarded = [](const char* key, auto make) {
    try {
      return make();
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string(key) + ": " + e.what());
    }
  };
  if (!tj.is_object() || !tj.contains("model")) throw std::invalid_argument("no 'model'");
  normalizer_ =
      guarded("normalizer", [&] { return std::make_unique<normalizer>(component("normalizer")); });
  pre_tokenizer_ = guarded(
      "pre_tokenizer", [&] { return std::make_unique<pre_tokenizer>(component("pre_tokenizer")); });
  model_ = guarded("model", [&] { return std::make_unique<bpe_model>(component("model")); });
  post_processor_ = guarded("post_processor", [&] {
    return std::make_unique<post_processor>(component("post_processor"));
  });
  decoder_ =
      guarded("decoder", [&] { return std::make_unique<token_decoder>(component("decoder")); });
  guarded("added_tokens", [&] {
    read_added_tokens(component("added_tokens"));
    return 0;
  });
  if (cfg != nullptr) read_config(*cfg);
}

void tokenizer::read_added_tokens(const nlohmann::json& list) {
  for (const auto& a : list) {
    added_token t;
    t.content = a.at("content").get<std::string>();
    if (t.content.empty()) continue;
    t.id = a.at("id").get<token_id>();
    if (token_id in_vocab = model_->find(t.content); in_vocab >= 0) t.id = in_vocab;
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    t.normalized = a.value("normalized", !t.special);
    int index;
    if (auto it = added_by_content_.find(t.content); it != added_by_content_.end()) {
      index = it->second;
      added_[static_cast<size_t>(index)] = t;
    } else {
      index = static_cast<int>(added_.size());
      added_.push_back(t);
      added_by_content_[t.content] = index;
    }
    added_by_id_[t.id] = index;
    if (t.special) special_contents_.insert(t.content);
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    auto& t = added_[i];
    t.decoded = t.normalized ? normalizer_->apply(t.content) : t.content;
    if (t.normalized) {
      normalized_trie_.insert(t.decoded, static_cast<int>(i));
    } else {
      raw_trie_.insert(t.content, static_cast<int>(i));
    }
  }
}

void tokenizer::read_config(const nlohmann::json& cfg) {
  // add_bos_token / add_eos_token are read by no one, on purpose: transformers 5 (checked
  // on 5.17) drops both from tokenizer_config.json whenever tokenizer.json exists
  // (PreTrainedTokenizerBase._from_pretrained in tokenization_utils_base.py), before any class
  // sees them, so TokenizersBackend.update_post_processor rebuilds the post-processor with both
  // false, and only where tokenizer.json's is null: BOS/EOS come from tokenizer.json's
  // post_processor alone, for PreTrainedTokenizerFast and LlamaTokenizerFast (DeepSeek-V3) alike.
  // (transformers 4's LlamaTokenizerFast honoured them; 5's LlamaTokenizer, used when no
  // config.json maps the model type to TokenizersBackend, also rebuilds the pipeline with a
  // Metaspace pre-tokenizer, which milesrt does not imitate.) test/tokenizer_oracle.test.cpp's
  // BosEosOracle holds this to AutoTokenizer.
  if (auto f = cfg.find("add_bos_token"); f != cfg.end() && f->is_boolean())
    add_bos_token_ = f->get<bool>();
  if (auto f = cfg.find("add_eos_token"); f != cfg.end() && f->is_boolean())
    add_eos_token_ = f->get<bool>();
  if (auto f = cfg.find("tokenizer_class"); f != cfg.end() && f->is_string())
    tokenizer_class_ = f->get<std::string>();
  bos_token_ = token_text(cfg, "bos_token");
  eos_token_ = token_text(cfg, "eos_token");
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (auto text = token_text(cfg, name); !text.empty()) special_tokens_.emplace_back(name, text);
  }
  auto ct = cfg.find("chat_template");
  if (ct != cfg.end() && ct->is_string()) {
    chat_template_ = ct->get<std::string>();
  } else if (ct != cfg.end() && ct->is_array()) {
    for (const auto& t : *ct) {
      if (t.is_object() && t.value("name", std::string()) == "default" && t.contains("template") &&
          t.at("template").is_string()) {
        chat_template_ = t.at("template").get<std::string>();
      }
    }
  }
}

// AddedVocabulary::find_matches of HF, on one piece of text.
void tokenizer::split_added(const std::string& s, const trie& t, std::vector<piece>& out) const {
  if (t.empty()) {
    if (!s.empty()) out.push_back({s, -1});
    return;
  }
  size_t start_offset = 0;
  for (size_t i = 0; i < s.size();) {
    auto [len, index] = t.longest(s, i);
    if (index < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // the automaton resumes after the match, whether it is kept or not
    const added_token& tok = added_[static_cast<size_t>(index)];
    if (tok.single_word) {
      bool start_space = start == 0 || !word_end().search(std::string_view(s).substr(0, start));
      bool stop_space = stop == s.size() || !word_start().search(std::string_view(s).substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t newstart = start;
      spaces_at_end().find_all(std::string_view(s).substr(0, start),
                               [&](size_t a, size_t) { newstart = std::min(newstart, a); });
      start = std::max(newstart, start_offset);
    }
    if (tok.rstrip) {
      size_t extra = 0;
      spaces_at_start().find_all(std::string_view(s).substr(stop), [&](size_t a, size_t b) {
        if (a == 0) extra = std::max(extra, b);
      });
      stop += extra;
    }
    if (start_offset < start) out.push_back({s.substr(start_offset, start - start_offset), -1});
    out.push_back({s.substr(start, stop - start), index});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({s.substr(start_offset), -1});
}

std::vector<token_id> tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  std::string text = utf8::valid(input) ? std::string(input) : utf8::repair(input);
  std::vector<piece> raw, pieces;
  split_added(text, raw_trie_, raw);
  for (auto& p : raw) {
    if (p.added >= 0) {
      pieces.push_back(std::move(p));
    } else {
      split_added(normalizer_->empty() ? p.text : normalizer_->apply(p.text), normalized_trie_,
                  pieces);
    }
  }
  std::vector<token_id> ids;
  std::vector<std::string> words;
  for (const auto& p : pieces) {
    if (p.added >= 0) {
      ids.push_back(added_[static_cast<size_t>(p.added)].id);
      continue;
    }
    words.clear();
    pre_tokenizer_->apply(p.text, words);
    for (const auto& w : words) model_->encode_word(w, ids);
  }
  return add_special_tokens ? post_processor_->apply(ids) : ids;
}

std::optional<bos_policy> parse_bos_policy(std::string_view word) {
  if (word == "auto") return bos_policy::model;
  if (word == "config") return bos_policy::config;
  if (word == "never") return bos_policy::never;
  return std::nullopt;
}

std::vector<token_id> tokenizer::encode_prompt(std::string_view text, bos_policy policy) const {
  std::vector<token_id> plain = encode(text, false);
  if (policy == bos_policy::never) return plain;
  // transformers 4's LlamaTokenizerFast / CodeLlamaTokenizerFast / GemmaTokenizerFast rebuild the
  // post-processor from add_bos_token (default true) and add_eos_token (default false); its other
  // fast classes leave tokenizer.json's alone (checked against transformers 4.57 by
  // test/tokenizer_oracle.test.cpp's BosPolicyOracle).
  static const char* const llama_family[] = {"LlamaTokenizer",     "LlamaTokenizerFast",
                                             "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                                             "GemmaTokenizer",     "GemmaTokenizerFast"};
  bool llama = false;
  for (const char* c : llama_family) llama = llama || tokenizer_class_ == c;
  std::optional<bool> add_bos = add_bos_token_, add_eos = add_eos_token_;
  if (policy == bos_policy::model) {
    if (!llama) return post_processor_->apply(plain);
    add_bos = add_bos.value_or(true);
    add_eos = add_eos.value_or(false);
  }
  auto special = [&](const std::string& token, const char* what) {
    token_id id = token.empty() ? -1 : token_to_id(token);
    if (id < 0) {
      throw std::invalid_argument(std::string("tokenizer_config.json asks for ") + what +
                                  " but its " + what + " '" + token +
                                  "' is not a token of tokenizer.json");
    }
    return std::vector<token_id>{id};
  };
  std::vector<token_id> out =
      add_bos ? (*add_bos ? special(bos_token_, "bos_token") : std::vector<token_id>{})
              : post_processor_->prefix();
  out.insert(out.end(), plain.begin(), plain.end());
  auto tail = add_eos ? (*add_eos ? special(eos_token_, "eos_token") : std::vector<token_id>{})
                      : post_processor_->suffix();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

std::string tokenizer::decode(const std::vector<token_id>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (token_id id : ids) {
    auto added = added_by_id_.find(id);
    const std::string* t = added != added_by_id_.end()
                               ? &added_[static_cast<size_t>(added->second)].decoded
                               : model_->token(id);
    if (t == nullptr) continue;
    if (skip_special_tokens && special_contents_.count(*t)) continue;
    tokens.push_back(*t);
  }
  return decoder_->apply(std::move(tokens));
}

token_id tokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) {
    return added_[static_cast<size_t>(it->second)].id;
  }
  return model_->find(token);
}

const std::string* tokenizer::id_to_token(token_id id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
    return &added_[static_cast<size_t>(it->second)].content;
  }
  return model_->token(id);
}

bool tokenizer::is_special(token_id id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_[static_cast<size_t>(it->second)].special;
}

}  // namespace milesrt::llm
