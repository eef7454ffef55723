#include "actors/lib/llm/tokenizer/bpe.hpp"

#include <tbb/enumerable_thread_specific.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>

#include "actors/lib/llm/tokenizer/utf8.hpp"

namespace milesrt::llm {
namespace {

std::string opt_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
}

}  // namespace

// Per thread, so that lookups need no lock; native TLS keys make local() a pthread_getspecific.
struct bpe_model::word_caches {
  using cache = std::unordered_map<std::string, std::vector<token_id>>;
  tbb::enumerable_thread_specific<cache, tbb::cache_aligned_allocator<cache>,
                                  tbb::ets_key_per_instance>
      per_thread;
};

bpe_model::~bpe_model() = default;

bpe_model::bpe_model(const nlohmann::json& model) : caches_(std::make_unique<word_caches>()) {
  if (model.value("type", std::string("BPE")) != "BPE") {
    throw std::invalid_argument("model type '" + model.value("type", std::string()) +
                                "' is not supported (only BPE)");
  }
  if (auto d = model.find("dropout"); d != model.end() && !d->is_null() && d->get<double>() > 0) {
    throw std::invalid_argument("model BPE: dropout is not supported (encoding must be exact)");
  }
  const auto& vocab = model.at("vocab");
  if (!vocab.is_object()) throw std::invalid_argument("model BPE: 'vocab' is not an object");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto id = it.value().get<token_id>();
    if (id < 0) throw std::invalid_argument("model BPE: negative id for '" + it.key() + "'");
    vocab_[it.key()] = id;
    if (static_cast<size_t>(id) >= tokens_.size()) {
      tokens_.resize(static_cast<size_t>(id) + 1);
      present_.resize(static_cast<size_t>(id) + 1);
    }
    tokens_[static_cast<size_t>(id)] = it.key();
    present_[static_cast<size_t>(id)] = true;
  }
  continuing_subword_prefix_ = opt_string(model, "continuing_subword_prefix");
  end_of_word_suffix_ = opt_string(model, "end_of_word_suffix");
  fuse_unk_ = model.value("fuse_unk", false);
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  if (std::string unk = opt_string(model, "unk_token"); !unk.empty()) {
    unk_ = find(unk);
    if (unk_ < 0)
      throw std::invalid_argument("model BPE: unk_token '" + unk + "' is not in the vocabulary");
  }
  const auto& merges = model.at("merges");
  if (!merges.is_array()) throw std::invalid_argument("model BPE: 'merges' is not a list");
  merges_.reserve(merges.size());
  uint32_t rank = 0;
  for (const auto& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const auto& s = m.get_ref<const std::string&>();
      if (rank == 0 && s.rfind("#version", 0) == 0) continue;
      auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw std::invalid_argument("model BPE: merge " + std::to_string(rank + 1) + " '" + s +
                                    "' is not two tokens separated by one space");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw std::invalid_argument("model BPE: merge " + std::to_string(rank + 1) +
                                  " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    token_id ia = find(a), ib = find(b);
    std::string joined = a + b.substr(std::min(b.size(), continuing_subword_prefix_.size()));
    token_id ij = find(joined);
    if (ia < 0 || ib < 0 || ij < 0) {
      throw std::invalid_argument("model BPE: merge " + std::to_string(rank + 1) + " ('" + a +
                                  "', '" + b + "') names a token that is not in the vocabulary");
    }
    merges_[pair_key(ia, ib)] = {rank, ij};  // a repeated pair keeps its last rank, as HF does
    ++rank;
  }
}

token_id bpe_model::find(std::string_view t) const {
  auto it = vocab_.find(std::string(t));
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* bpe_model::token(token_id id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[static_cast<size_t>(id)]) {
    return nullptr;
  }
  return &tokens_[static_cast<size_t>(id)];
}

void bpe_model::encode_word(std::string_view w, std::vector<token_id>& out) const {
  if (w.empty()) return;
  if (w.size() > word_cache_max_bytes) return encode_uncached(w, out);
  auto& cache = caches_->per_thread.local();
  std::string key(w);
  if (auto it = cache.find(key); it != cache.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t from = out.size();
  encode_uncached(w, out);
  if (cache.size() >= word_cache_capacity) cache.clear();
  cache.emplace(std::move(key),
                std::vector<token_id>(out.begin() + static_cast<std::ptrdiff_t>(from), out.end()));
}

void bpe_model::encode_uncached(std::string_view w, std::vector<token_id>& out) const {
  if (ignore_merges_) {
    if (token_id id = find(w); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<token_id> symbols;
  symbols.reserve(w.size());
  token_id pending_unk = -1;
  std::string piece;
  for (size_t i = 0; i < w.size();) {
    size_t n = std::min(utf8::char_len(static_cast<unsigned char>(w[i])), w.size() - i);
    bool first = i == 0, last = i + n == w.size();
    piece.assign(first ? "" : continuing_subword_prefix_);
    piece.append(w.substr(i, n));
    if (last) piece += end_of_word_suffix_;
    i += n;
    if (token_id id = find(piece); id >= 0) {
      if (pending_unk >= 0) symbols.push_back(pending_unk), pending_unk = -1;
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<token_id> bytes;
      for (unsigned char c : piece) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", c);
        token_id id = find(name);
        if (id < 0) break;
        bytes.push_back(id);
      }
      if (bytes.size() == piece.size()) {
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_ >= 0) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
      pending_unk = unk_;
    }
    // Without unk_token HF drops the character; so do we.
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
  merge_all(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

// HF's Word::merge_all: a min-heap of (rank, position); a popped entry applies only while the
// pair at its position still merges into the same token.
void bpe_model::merge_all(std::vector<token_id>& sym) const {
  const size_t n = sym.size();
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
  }
  struct entry {
    uint32_t rank;
    int pos;
    token_id result;
    bool operator>(const entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<entry, std::vector<entry>, std::greater<entry>> heap;
  auto push = [&](int pos) {
    int nx = next[static_cast<size_t>(pos)];
    if (nx < 0) return;
    auto it = merges_.find(pair_key(sym[static_cast<size_t>(pos)], sym[static_cast<size_t>(nx)]));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.result});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
  while (!heap.empty()) {
    entry top = heap.top();
    heap.pop();
    auto p = static_cast<size_t>(top.pos);
    if (!alive[p] || next[p] < 0) continue;
    auto r = static_cast<size_t>(next[p]);
    auto it = merges_.find(pair_key(sym[p], sym[r]));
    if (it == merges_.end() || it->second.result != top.result) continue;
    sym[p] = top.result;
    alive[r] = false;
    next[p] = next[r];
    if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = top.pos;
    if (prev[p] >= 0) push(prev[p]);
    push(top.pos);
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) sym[k++] = sym[i];
  }
  sym.resize(k);
}

}  // namespace milesrt::llm
