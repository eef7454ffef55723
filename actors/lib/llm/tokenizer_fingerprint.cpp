#include "actors/lib/llm/tokenizer_fingerprint.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace {
using nlohmann::json;
constexpr const char* format = "milesrt-tokenizer-fingerprint 1";

void put(tokenizer_fingerprint& f, int64_t id, std::string token) {
  if (id < 0 || id > (int64_t{1} << 26)) throw std::invalid_argument("a token id out of range");
  if (static_cast<size_t>(id) >= f.vocab.size()) f.vocab.resize(static_cast<size_t>(id) + 1);
  f.vocab[static_cast<size_t>(id)] = std::move(token);
}

/// tokenizer.json's model.vocab: {token: id} (BPE, WordPiece, WordLevel) or [[piece, score]]
/// (Unigram, the index is the id).
void read_vocab(tokenizer_fingerprint& f, const json& model) {
  const auto vocab = model.find("vocab");
  if (vocab == model.end()) return;
  if (vocab->is_object()) {
    for (const auto& [token, id] : vocab->items()) put(f, id.get<int64_t>(), token);
  } else if (vocab->is_array()) {
    for (size_t i = 0; i < vocab->size(); ++i)
      put(f, static_cast<int64_t>(i), (*vocab)[i].at(0).get<std::string>());
  }
}

std::string shown(const std::optional<std::string>& t) {
  return t ? "'" + runtime::excerpt(*t, 60) + "'" : "no token";
}

}  // namespace

tokenizer_fingerprint fingerprint_of(const std::filesystem::path& dir) {
  const auto path = dir / "tokenizer.json";
  tokenizer_fingerprint f;
  try {
    const auto tj = json::parse(runtime::read_regular_file(path));
    if (tj.contains("model")) read_vocab(f, tj["model"]);
    for (const auto& a : tj.value("added_tokens", json::array())) {
      const auto id = a.at("id").get<int64_t>();
      put(f, id, a.at("content").get<std::string>());
      if (a.value("special", false)) f.special.push_back(id);
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(path.string() + ": " + e.what());
  }
  std::sort(f.special.begin(), f.special.end());
  f.special.erase(std::unique(f.special.begin(), f.special.end()), f.special.end());
  auto loaded = tokenizer::load(dir);
  if (!loaded.tok) throw std::invalid_argument(loaded.error);
  for (const auto& [name, text] : loaded.tok->special_tokens())
    if (!text.empty()) f.named[name] = text;
  return f;
}

std::string to_json(const tokenizer_fingerprint& f) {
  json vocab = json::array();
  for (const auto& t : f.vocab) vocab.push_back(t ? json(*t) : json(nullptr));
  json named = json::object();
  for (const auto& [k, v] : f.named) named[k] = v;
  const json j = {{"format", format}, {"vocab", vocab}, {"special", f.special}, {"named", named}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

tokenizer_fingerprint fingerprint_from_json(const std::string& text) {
  if (auto deep = runtime::json_nesting_problem(text); !deep.empty())
    throw std::invalid_argument("the tokenizer fingerprint is " + deep);
  tokenizer_fingerprint f;
  try {
    const auto j = json::parse(text);
    if (j.value("format", "") != format)
      throw std::invalid_argument(std::string("its format is not \"") + format + "\"");
    for (const auto& t : j.at("vocab"))
      f.vocab.push_back(t.is_null() ? std::nullopt : std::optional(t.get<std::string>()));
    f.special = j.at("special").get<std::vector<int64_t>>();
    f.named = j.at("named").get<std::map<std::string, std::string>>();
  } catch (const std::exception& e) {
    throw std::invalid_argument("a malformed tokenizer fingerprint (" + std::string(e.what()) +
                                "): '" + runtime::excerpt(text, 80) + "'");
  }
  std::sort(f.special.begin(), f.special.end());
  return f;
}

std::string first_difference(const tokenizer_fingerprint& a, const std::string& a_name,
                             const tokenizer_fingerprint& b, const std::string& b_name) {
  const size_t n = std::max(a.vocab.size(), b.vocab.size());
  for (size_t id = 0; id < n; ++id) {
    const auto ta = id < a.vocab.size() ? a.vocab[id] : std::nullopt;
    const auto tb = id < b.vocab.size() ? b.vocab[id] : std::nullopt;
    if (ta != tb)
      return "token " + std::to_string(id) + " is " + shown(ta) + " in the " + a_name + "'s, " +
             shown(tb) + " in the " + b_name + "'s";
  }
  for (size_t i = 0; i < std::max(a.special.size(), b.special.size()); ++i) {
    const bool in_a = i < a.special.size(), in_b = i < b.special.size();
    if (in_a && in_b && a.special[i] == b.special[i]) continue;
    // The smaller id at the first disagreement is special on one side only.
    const bool a_side = in_a && (!in_b || a.special[i] < b.special[i]);
    const int64_t id = a_side ? a.special[i] : b.special[i];
    return "token " + std::to_string(id) + " is special in the " + (a_side ? a_name : b_name) +
           "'s, not in the " + (a_side ? b_name : a_name) + "'s";
  }
  for (const auto& [name, text] : a.named) {
    auto it = b.named.find(name);
    const std::optional<std::string> other =
        it == b.named.end() ? std::nullopt : std::optional(it->second);
    if (other != text)
      return name + " is " + shown(text) + " in the " + a_name + "'s, " + shown(other) +
             " in the " + b_name + "'s";
  }
  for (const auto& [name, text] : b.named)
    if (!a.named.count(name))
      return name + " is no token in the " + a_name + "'s, " + shown(text) + " in the " + b_name +
             "'s";
  return "";
}

}  // namespace milesrt::llm
