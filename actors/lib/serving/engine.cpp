#include "actors/lib/serving/engine.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "actors/lib/serving/device_sampling.hpp"
#include "kernels/device.hpp"

namespace milesrt::serving {

namespace {
// Refuses a KV pool larger than the memory of its device (docs/limits.md, "Sampling") before
// allocating it: an allocation that large fails deep inside libtorch, or swaps.
int64_t fitting(const llm::decoder& model, const engine_config& config) {
  size_t free_bytes = 0, total_bytes = 0;
  double memory = llm::physical_memory_bytes();
  const char* what = "the machine's memory";
  if (model.device().is_cuda() &&
      kernels::cuda_memory_info(model.device().index() < 0 ? 0 : model.device().index(), free_bytes,
                                total_bytes)) {
    memory = double(total_bytes);
    what = "the GPU's memory";
  }
  const double bytes = double(config.num_blocks) * double(config.block_size) *
                       double(model.kv_block_bytes(1));  // doubles: no overflow
  if (memory > 0 && bytes > memory) {
    char line[200];
    std::snprintf(line, sizeof line, "%.1f GiB (%lld blocks of %lld tokens) exceeds %s (%.1f GiB)",
                  bytes / double(1ull << 30), static_cast<long long>(config.num_blocks),
                  static_cast<long long>(config.block_size), what, memory / double(1ull << 30));
    throw std::invalid_argument(std::string("the KV cache of ") + line);
  }
  return config.num_blocks;
}
}  // namespace

int64_t resolve_num_blocks(const llm::decoder& model, const engine_config& config) {
  if (config.kv_memory_fraction == 0 || !model.device().is_cuda()) return fitting(model, config);
  if (!(config.kv_memory_fraction > 0 && config.kv_memory_fraction <= 1)) {
    throw std::invalid_argument("kv memory fraction " + std::to_string(config.kv_memory_fraction) +
                                " is not in (0, 1]");
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (!kernels::cuda_memory_info(model.device().index() < 0 ? 0 : model.device().index(),
                                 free_bytes, total_bytes)) {
    throw std::runtime_error("kv memory fraction: cannot read the GPU's free memory");
  }
  // The attention workspaces and the step's activations come out of the same memory: keep 1 GiB.
  const double usable =
      std::max(0.0, double(free_bytes) * config.kv_memory_fraction - double(1ull << 30));
  const int64_t blocks =
      static_cast<int64_t>(usable / double(model.kv_block_bytes(config.block_size)));
  if (blocks < 1) {
    throw std::runtime_error("kv memory fraction " + std::to_string(config.kv_memory_fraction) +
                             " of " + std::to_string(free_bytes >> 20) +
                             " MiB free leaves no KV block");
  }
  return blocks;
}

namespace {
engine_config resolved(const llm::decoder& model, engine_config config) {
  config.num_blocks = resolve_num_blocks(model, config);
  return config;
}
}  // namespace

engine::engine(const llm::decoder& model, engine_config config)
    : model_(model),
      config_(resolved(model, std::move(config))),
      cache_(model.make_cache(config_.num_blocks, config_.block_size)),
      blocks_(config_.num_blocks),
      prefix_(blocks_, config_.block_size) {
  make_graphs();
}

void engine::make_graphs() {
  if (config_.decode_graphs == engine_config::graphs::off || config_.graph_max_batch <= 0 ||
      !decode_graphs::supported(model_, cache_)) {
    return;
  }
  if (graph_dummy_block_ < 0) {
    // Padding rows of a bucket write their K/V into a block no sequence owns.
    const auto dummy = blocks_.allocate();
    if (!dummy)
      throw std::invalid_argument("rollout engine: no KV block for the CUDA graphs' padding rows");
    graph_dummy_block_ = *dummy;
  }
  graphs_ =
      std::make_unique<decode_graphs>(model_, cache_, graph_dummy_block_, config_.graph_max_batch,
                                      config_.decode_graphs == engine_config::graphs::capture);
}

std::vector<sample> engine::release_kv(pause_mode mode) {
  if (kv_released_) return {};
  // The sequences' KV goes with the pool: abort them, or requeue them to be recomputed.
  auto aborted =
      update_weights(version_, mode == pause_mode::abort ? pause_mode::abort : pause_mode::retract);
  if (graphs_) released_graph_stats_ = graphs_->stats();
  graphs_.reset();  // the graphs hold the cache's addresses
  cache_ = llm::kv_cache{};
  kv_released_ = true;
  return aborted;
}

void engine::retake_kv() {
  if (!kv_released_) return;
  cache_ = model_.make_cache(config_.num_blocks, config_.block_size);
  make_graphs();
  if (graphs_) graphs_->continue_stats(released_graph_stats_);
  kv_released_ = false;
}

void engine::add(const generate_request& r) {
  const auto where = "request " + std::to_string(r.id) + ": ";
  if (r.prompt.empty()) throw std::invalid_argument(where + "empty prompt");
  for (auto id : r.prompt) {
    if (id < 0 || id >= model_.config().vocab_size) {
      throw std::invalid_argument(where + "token id " + std::to_string(id) +
                                  " is outside the vocabulary of " +
                                  std::to_string(model_.config().vocab_size));
    }
  }
  using limits = request_limits;
  if (!(r.params.temperature >= limits::min_temperature &&
        r.params.temperature <= limits::max_temperature)) {
    throw std::invalid_argument(where + "temperature must be from 1e-05 to 100000");
  }
  if (!(r.params.top_p > 0 && r.params.top_p <= 1))
    throw std::invalid_argument(where + "top_p must be in (0, 1]");
  if (r.params.top_k < 0 || r.params.top_k > limits::max_top_k)
    throw std::invalid_argument(where + "top_k must be from 0 to " +
                                std::to_string(limits::max_top_k));
  if (r.params.max_new_tokens < 1 || r.params.max_new_tokens > limits::max_new_tokens)
    throw std::invalid_argument(where + "max_new_tokens must be from 1 to " +
                                std::to_string(limits::max_new_tokens));
  if (r.params.n < 1 || r.params.n > limits::max_n)
    throw std::invalid_argument(where + "n must be from 1 to " + std::to_string(limits::max_n));
  if (!r.params.stop_strings.empty() && !config_.detokenize) {
    throw std::invalid_argument(where + "stop strings need a tokenizer");
  }
  const int64_t need =
      (int64_t(r.prompt.size()) + r.params.max_new_tokens + config_.block_size - 1) /
      config_.block_size;
  if (need > config_.num_blocks) {
    throw std::invalid_argument(where + "needs up to " + std::to_string(need) +
                                " KV blocks, the cache has " + std::to_string(config_.num_blocks));
  }
  int64_t leader = -1;
  for (int64_t i = 0; i < r.params.n; ++i) {
    sequence s;
    s.request_id = r.id;
    s.index = i;
    s.arrival = arrivals_++;
    s.tokens = r.prompt;
    s.prompt_len = static_cast<int64_t>(r.prompt.size());
    s.params = r.params;
    s.rng.seed(r.params.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
    // Samples of one prompt wait for the first one's prompt blocks, then share them.
    if (i == 0) {
      leader = static_cast<int64_t>(s.arrival);
    } else {
      s.leader = leader;
    }
    waiting_.push_back(std::move(s));
  }
  prompt_done_[leader] = 0;
}

void engine::resume(const sample& cut, const sampling_params& params) {
  const auto where =
      "request " + std::to_string(cut.request_id) + " (sample " + std::to_string(cut.index) + "): ";
  if (cut.finish_reason != "abort") {
    throw std::invalid_argument(
        where + "only a sample an abort cut off can resume, not one that ended with '" +
        cut.finish_reason + "'");
  }
  const auto out = static_cast<int64_t>(cut.output.size());
  if (cut.logprobs.size() != cut.output.size() || cut.versions.size() != cut.output.size() ||
      out >= params.max_new_tokens) {
    throw std::invalid_argument(where + "inconsistent: " + std::to_string(out) + " tokens, " +
                                std::to_string(cut.logprobs.size()) + " log-probs, " +
                                std::to_string(cut.versions.size()) + " versions, at most " +
                                std::to_string(params.max_new_tokens) + " new tokens");
  }
  sequence s;
  s.request_id = cut.request_id;
  s.index = cut.index;
  s.arrival = arrivals_++;
  s.tokens = cut.prompt;
  s.tokens.insert(s.tokens.end(), cut.output.begin(), cut.output.end());
  s.prompt_len = static_cast<int64_t>(cut.prompt.size());
  s.logprobs = cut.logprobs;
  s.versions = cut.versions;
  s.entropies = cut.entropies;
  s.experts = cut.experts;  // recomputed with the KV, position by position
  s.params = params;
  s.rng.seed(params.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(cut.index));
  s.rng.discard(static_cast<unsigned long long>(out));  // one draw per sampled token (sample_token)
  waiting_.push_back(std::move(s));
}

bool engine::ensure_blocks(sequence& s, int64_t upto) {
  const int64_t need = (upto + config_.block_size - 1) / config_.block_size;
  while (static_cast<int64_t>(s.table.size()) < need) {
    auto b = blocks_.allocate();
    if (!b && prefix_.evict(1) == 1) b = blocks_.allocate();
    if (!b) return false;
    s.table.push_back(*b);
  }
  return true;
}

void engine::free_sequence(sequence& s, bool cache_blocks) {
  if (cache_blocks) {
    std::vector<int64_t> done(s.tokens.begin(), s.tokens.begin() + s.computed);
    prefix_.insert(done, s.table);
  }
  for (auto b : s.table) blocks_.release(b);
  s.table.clear();
  s.computed = 0;
  s.matched = false;
}

void engine::preempt(size_t index) {
  sequence s = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  // Its whole blocks stay in the prefix cache, so resuming usually finds them again.
  free_sequence(s, true);
  waiting_.push_front(std::move(s));
  stats_.preemptions++;
}

int64_t engine::sample_token(sequence& s, const at::Tensor& row, float* entropy) {
  auto logits = model_.logits_rows(row, s.params.temperature).squeeze(0).to(at::kCPU);
  auto probs = at::softmax(logits.to(at::kDouble), -1);
  if (entropy != nullptr) {
    *entropy = static_cast<float>(
        -(probs * at::log_softmax(logits.to(at::kDouble), -1)).sum().item<double>());
  }
  auto sorted = at::sort(probs, 0, /*descending=*/true);
  auto p = std::get<0>(sorted).contiguous();
  auto ids = std::get<1>(sorted).contiguous();
  const double* pp = p.data_ptr<double>();
  const int64_t* ip = ids.data_ptr<int64_t>();
  int64_t keep = p.numel();
  if (s.params.top_k > 0) keep = std::min(keep, s.params.top_k);
  if (s.params.top_p < 1.0) {
    double cum = 0;
    for (int64_t i = 0; i < keep; ++i) {
      cum += pp[i];
      if (cum >= s.params.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += pp[i];
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(s.rng) * total;
  double cum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    cum += pp[i];
    if (u < cum) return ip[i];
  }
  return ip[keep - 1];
}

sample engine::finish(sequence& s, const std::string& reason) {
  sample out;
  out.request_id = s.request_id;
  out.index = s.index;
  out.prompt.assign(s.tokens.begin(), s.tokens.begin() + s.prompt_len);
  out.output.assign(s.tokens.begin() + s.prompt_len, s.tokens.end());
  out.logprobs = s.logprobs;
  out.versions = s.versions;
  out.entropies = s.entropies;
  out.experts = s.experts;
  out.finish_reason = reason;
  return out;
}

sample engine::output_since(uint64_t id, size_t from) const {
  sample out;
  out.request_id = id;
  auto take = [&](const sequence& s) {
    if (s.request_id != id || s.index != 0) return false;
    const size_t have = s.tokens.size() - static_cast<size_t>(s.prompt_len);
    const size_t n = std::min(s.logprobs.size(), have);
    if (from >= n) return true;
    const auto at = static_cast<std::ptrdiff_t>(from);
    out.output.assign(s.tokens.begin() + s.prompt_len + at,
                      s.tokens.begin() + s.prompt_len + at + static_cast<std::ptrdiff_t>(n - from));
    out.logprobs.assign(s.logprobs.begin() + at,
                        s.logprobs.begin() + static_cast<std::ptrdiff_t>(n));
    out.versions.assign(s.versions.begin() + at,
                        s.versions.begin() + static_cast<std::ptrdiff_t>(n));
    return true;
  };
  for (const auto& s : running_)
    if (take(s)) return out;
  for (const auto& s : waiting_)
    if (take(s)) return out;
  return out;
}

std::vector<int64_t> engine::schedule_running(int64_t& budget) {
  std::sort(running_.begin(), running_.end(),
            [](const sequence& a, const sequence& b) { return a.arrival < b.arrival; });
  std::vector<int64_t> chunk(running_.size(), 0);
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    auto& s = running_[i];
    int64_t n = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - s.computed, budget);
    while (!ensure_blocks(s, s.computed + n)) {
      if (running_.size() - 1 == i) break;  // it is the newest itself: preempted below
      preempt(running_.size() - 1);
      chunk.resize(running_.size());
    }
    if (static_cast<int64_t>(s.table.size()) * config_.block_size < s.computed + n) {
      preempt(i);
      chunk.resize(running_.size());
      break;
    }
    chunk[i] = n;
    budget -= n;
  }
  chunk.resize(running_.size());
  return chunk;
}

void engine::admit_waiting(std::vector<int64_t>& chunk, int64_t& budget) {
  for (auto it = waiting_.begin();
       it != waiting_.end() && budget > 0 &&
       (config_.max_running <= 0 || static_cast<int64_t>(running_.size()) < config_.max_running);) {
    auto& s = *it;
    if (s.leader >= 0 && prompt_done_.count(s.leader) && prompt_done_[s.leader] == 0) {
      ++it;  // waits for its first sibling's prompt blocks
      continue;
    }
    if (!s.matched) {
      auto hit = prefix_.match(s.tokens, static_cast<int64_t>(s.tokens.size()) - 1);
      s.table = hit;
      s.computed = static_cast<int64_t>(hit.size()) * config_.block_size;
      s.matched = true;
    }
    int64_t n = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - s.computed, budget);
    if (!ensure_blocks(s, s.computed + n)) break;  // no room: it keeps its place in the queue
    budget -= n;
    running_.push_back(std::move(s));
    chunk.push_back(n);
    it = waiting_.erase(it);
  }
}

engine::step_plan engine::schedule(std::vector<llm::segment>& segments) {
  int64_t budget = config_.max_tokens_per_step;
  // Running sequences first (decode tokens and unfinished prefills), oldest first. When blocks run
  // out, the newest running sequence is preempted (it resumes later; nothing is truncated).
  std::vector<int64_t> chunk = schedule_running(budget);
  // Then waiting sequences, in order, while the budget and the blocks last.
  admit_waiting(chunk, budget);
  step_plan plan;  // filled after running_ stops changing
  for (size_t i = 0; i < running_.size(); ++i) {
    if (chunk[i] == 0) continue;
    auto& s = running_[i];
    std::vector<int64_t> ids(s.tokens.begin() + s.computed,
                             s.tokens.begin() + s.computed + chunk[i]);
    segments.push_back({std::move(ids), s.computed, &s.table});
    plan.push_back({&s, chunk[i]});
  }
  return plan;
}

std::vector<device_sample_result> engine::run_decode_graphs(const step_plan& plan) {
  std::vector<decode_row> rows;
  rows.reserve(plan.size());
  for (const auto& [seq, n] : plan) {
    decode_row r;
    r.token = seq->tokens.back();
    r.position = seq->computed;
    r.table = &seq->table;
    r.temperature = seq->params.temperature;
    r.seed = sample_stream(seq->params.seed, seq->index);
    rows.push_back(r);
  }
  // The step expected next, staged while this one runs: every row that may go on (it has not
  // reached its length), one position further, with a KV block for it. A stop token, a
  // sequence joining or a preemption makes the next step differ; it is then staged again.
  std::vector<decode_row> next;
  if (config_.overlap_host) {
    for (size_t k = 0; k < plan.size(); ++k) {
      auto& s = *plan[k].first;
      const int64_t generated = static_cast<int64_t>(s.tokens.size()) + 1 - s.prompt_len;
      if (generated >= s.params.max_new_tokens) continue;
      if (!ensure_blocks(s, s.computed + 2)) {
        next.clear();
        break;
      }
      decode_row r = rows[k];
      r.from = static_cast<int64_t>(k);
      r.position = s.computed + 1;
      next.push_back(r);
    }
  }
  return graphs_->run(rows, next.empty() ? nullptr : &next);
}

std::vector<device_sample_result> engine::sample_batch_on_device(const step_plan& plan,
                                                                 const at::Tensor& hidden) {
  std::vector<device_sample_request> requests;
  bool entropy = false;
  int64_t at_row = 0;
  for (const auto& [seq, n] : plan) {
    if (seq->computed + n == static_cast<int64_t>(seq->tokens.size())) {
      device_sample_request r;
      r.row = at_row + n - 1;
      r.temperature = seq->params.temperature;
      r.top_p = seq->params.top_p;
      r.top_k = seq->params.top_k;
      r.seed = sample_stream(seq->params.seed, seq->index);
      r.position = static_cast<int64_t>(seq->tokens.size());
      requests.push_back(r);
      entropy = entropy || seq->params.return_entropy;
    }
    at_row += n;
  }
  return sample_on_device(model_, hidden, requests, entropy);
}

engine::step_output engine::execute(const step_plan& plan,
                                    const std::vector<llm::segment>& segments) {
  // On the GPU every sequence that samples this step samples in one batch, before the loop below;
  // a step of decode rows only runs as a CUDA graph when the runner takes it.
  step_output out;
  out.all_decode = graphs_ != nullptr && graphs_->bucket(static_cast<int64_t>(plan.size())) > 0;
  for (const auto& [seq, n] : plan) {
    out.all_decode = out.all_decode && n == 1 &&
                     seq->computed + 1 == static_cast<int64_t>(seq->tokens.size()) &&
                     seq->params.top_k == 0 && seq->params.top_p >= 1.0;
  }
  if (out.all_decode) {
    out.drawn = run_decode_graphs(plan);
  } else {
    out.fr = model_.forward(segments, {&cache_, nullptr});
    if (model_.device().is_cuda()) out.drawn = sample_batch_on_device(plan, out.fr.hidden);
  }
  return out;
}

void engine::computed_chunk(sequence& s, int64_t n, int64_t row, const at::Tensor& experts,
                            const step_output& out, size_t k) {
  const bool decode = s.computed >= s.prompt_len;
  (decode ? stats_.decode_tokens : stats_.prefill_tokens) += n;
  if (experts.defined()) {
    s.experts.resize(s.computed + n);
    const int64_t width = experts.size(1);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t* e = experts.data_ptr<int64_t>() + (row + r) * width;
      s.experts[s.computed + r] = std::vector<int64_t>(e, e + width);
    }
  }
  if (out.all_decode && !out.drawn.at(k).experts.empty()) {  // a captured MoE step's routing
    s.experts.resize(s.computed + 1);
    s.experts[s.computed] = out.drawn[k].experts;
  }
  s.computed += n;
  // The first sample of a prompt shares its whole prompt blocks once they are written.
  auto leader = prompt_done_.find(static_cast<int64_t>(s.arrival));
  if (leader != prompt_done_.end() && leader->second == 0 && s.computed >= s.prompt_len - 1) {
    std::vector<int64_t> prompt(s.tokens.begin(), s.tokens.begin() + s.computed);
    prefix_.insert(prompt, s.table);
    leader->second = 1;
  }
}

const char* engine::take_next_token(sequence& s, const step_output& out, int64_t last_row,
                                    size_t& next_draw) {
  int64_t token;
  float logprob, entropy = 0;
  if (model_.device().is_cuda()) {
    const auto& d = out.drawn.at(next_draw++);
    token = d.token;
    logprob = d.logprob;
    entropy = d.entropy;
  } else {
    auto last = out.fr.hidden.narrow(0, last_row, 1);
    token = sample_token(s, last, s.params.return_entropy ? &entropy : nullptr);
    auto lp = model_.score_rows(last, at::tensor({token}, at::kLong), s.params.temperature);
    logprob = lp.logprobs.item<float>();
  }
  s.tokens.push_back(token);
  s.logprobs.push_back(logprob);
  if (s.params.return_entropy) s.entropies.push_back(entropy);
  s.versions.push_back(version_);
  bool stop = std::find(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end(), token) !=
              s.params.stop_token_ids.end();
  if (!stop && !s.params.stop_strings.empty()) {
    std::vector<int64_t> out_ids(s.tokens.begin() + s.prompt_len, s.tokens.end());
    const std::string text = config_.detokenize(out_ids);
    for (const auto& st : s.params.stop_strings)
      stop = stop || (!st.empty() && text.find(st) != std::string::npos);
  }
  const bool length =
      static_cast<int64_t>(s.tokens.size()) - s.prompt_len >= s.params.max_new_tokens;
  if (stop) return "stop";
  return length ? "length" : nullptr;
}

std::vector<sample> engine::advance(const step_plan& plan, const step_output& out) {
  std::vector<sample> finished;
  // MoE routing to the host once per step: [tokens, layers * top_k].
  at::Tensor experts;
  if (!out.fr.experts.empty()) experts = at::cat(out.fr.experts, 1).to(at::kCPU).contiguous();
  size_t next_draw = 0;
  int64_t row = 0;
  std::vector<size_t> done_idx;
  for (size_t k = 0; k < plan.size(); ++k) {
    auto& s = *plan[k].first;
    const int64_t n = plan[k].second;
    computed_chunk(s, n, row, experts, out, k);
    if (s.computed == static_cast<int64_t>(s.tokens.size())) {
      if (const char* reason = take_next_token(s, out, row + n - 1, next_draw)) {
        finished.push_back(finish(s, reason));
        done_idx.push_back(static_cast<size_t>(&s - running_.data()));
      }
    }
    row += n;
  }
  std::sort(done_idx.rbegin(), done_idx.rend());
  for (auto i : done_idx) {
    free_sequence(running_[i], true);
    prompt_done_.erase(static_cast<int64_t>(running_[i].arrival));
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return finished;
}

std::vector<sample> engine::step() {
  if (kv_released_) {
    throw std::logic_error(
        "rollout engine: step() while the KV pool is released (retake_kv() first)");
  }
  // The model may share a trainer's parameters, which require grad: build no autograd graph.
  at::NoGradGuard no_grad;
  std::vector<llm::segment> segments;
  const step_plan plan = schedule(segments);
  if (plan.empty()) {
    if (!waiting_.empty() && running_.empty()) {
      throw std::runtime_error("rollout engine: no waiting sequence fits into the free KV blocks");
    }
    return {};
  }
  const step_output out = execute(plan, segments);
  stats_.steps++;
  return advance(plan, out);
}

std::vector<sample> engine::run() {
  std::vector<sample> all;
  while (!idle()) {
    auto done = step();
    all.insert(all.end(), done.begin(), done.end());
  }
  return all;
}

std::vector<sample> engine::update_weights(uint64_t version, pause_mode mode) {
  std::vector<sample> aborted;
  version_ = version;
  if (mode == pause_mode::abort) {
    for (auto& s : running_) {
      aborted.push_back(finish(s, "abort"));
      free_sequence(s, false);
    }
    for (auto& s : waiting_) aborted.push_back(finish(s, "abort"));
    running_.clear();
    waiting_.clear();
    prompt_done_.clear();
  } else if (mode == pause_mode::retract) {
    std::sort(running_.begin(), running_.end(),
              [](const sequence& a, const sequence& b) { return a.arrival > b.arrival; });
    for (auto& s : running_) {
      free_sequence(s, false);  // its KV was computed under the old weights
      waiting_.push_front(std::move(s));
    }
    running_.clear();
  }
  // Cached KV belongs to the old weights.
  prefix_.flush();
  return aborted;
}

engine_stats engine::stats() const {
  engine_stats s = stats_;
  s.running = static_cast<int64_t>(running_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.used_blocks = blocks_.num_blocks() - blocks_.free_blocks();
  s.cached_blocks = prefix_.cached_blocks();
  s.prefix_hit_rate = prefix_.lookups_blocks()
                          ? double(prefix_.hit_blocks()) / double(prefix_.lookups_blocks())
                          : 0.0;
  return s;
}

}  // namespace milesrt::serving
