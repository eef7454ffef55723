#include "actors/lib/serving/scheduler.hpp"

#include <algorithm>

namespace milesrt::serving {

sample to_sample(const sequence& s, const std::string& reason) {
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

scheduler::scheduler(const engine_config& config)
    : config_(config), blocks_(config_.num_blocks), prefix_(blocks_, config_.block_size) {}

void scheduler::add(const generate_request& r) {
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

void scheduler::resume(const sample& cut, const sampling_params& params) {
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
  // One draw per sampled token (sampler::sample_on_host).
  s.rng.discard(static_cast<unsigned long long>(cut.output.size()));
  waiting_.push_back(std::move(s));
}

bool scheduler::ensure_blocks(sequence& s, int64_t upto) {
  const int64_t need = (upto + config_.block_size - 1) / config_.block_size;
  while (static_cast<int64_t>(s.table.size()) < need) {
    auto b = blocks_.allocate();
    if (!b && prefix_.evict(1) == 1) b = blocks_.allocate();
    if (!b) return false;
    s.table.push_back(*b);
  }
  return true;
}

void scheduler::free_sequence(sequence& s, bool cache_blocks) {
  if (cache_blocks) {
    std::vector<int64_t> done(s.tokens.begin(), s.tokens.begin() + s.computed);
    prefix_.insert(done, s.table);
  }
  for (auto b : s.table) blocks_.release(b);
  s.table.clear();
  s.computed = 0;
  s.matched = false;
}

void scheduler::preempt(size_t index) {
  sequence s = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  // Its whole blocks stay in the prefix cache, so resuming usually finds them again.
  free_sequence(s, true);
  waiting_.push_front(std::move(s));
  stats_.preemptions++;
}

sample scheduler::output_since(uint64_t id, size_t from) const {
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

std::vector<int64_t> scheduler::schedule_running(int64_t& budget) {
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

void scheduler::admit_waiting(std::vector<int64_t>& chunk, int64_t& budget) {
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

step_plan scheduler::schedule(std::vector<llm::segment>& segments) {
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

std::vector<size_t> scheduler::reserve_next_decode(const step_plan& plan) {
  // A stop token, a sequence joining or a preemption makes the next step differ from this guess;
  // it is then staged again.
  std::vector<size_t> next;
  for (size_t k = 0; k < plan.size(); ++k) {
    auto& s = *plan[k].first;
    const int64_t generated = static_cast<int64_t>(s.tokens.size()) + 1 - s.prompt_len;
    if (generated >= s.params.max_new_tokens) continue;
    if (!ensure_blocks(s, s.computed + 2)) return {};
    next.push_back(k);
  }
  return next;
}

void scheduler::computed_chunk(sequence& s, int64_t n, int64_t row, const step_output& out,
                               size_t k) {
  const bool decode = s.computed >= s.prompt_len;
  (decode ? stats_.decode_tokens : stats_.prefill_tokens) += n;
  if (out.experts.defined()) {
    s.experts.resize(s.computed + n);
    const int64_t width = out.experts.size(1);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t* e = out.experts.data_ptr<int64_t>() + (row + r) * width;
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

const char* scheduler::append_token(sequence& s, const device_sample_result& drawn,
                                    uint64_t version) {
  const int64_t token = drawn.token;
  s.tokens.push_back(token);
  s.logprobs.push_back(drawn.logprob);
  if (s.params.return_entropy) s.entropies.push_back(drawn.entropy);
  s.versions.push_back(version);
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

std::vector<sample> scheduler::update(const step_plan& plan, const step_output& out,
                                      uint64_t version) {
  std::vector<sample> finished;
  size_t next_draw = 0;
  int64_t row = 0;
  std::vector<size_t> done_idx;
  for (size_t k = 0; k < plan.size(); ++k) {
    auto& s = *plan[k].first;
    const int64_t n = plan[k].second;
    computed_chunk(s, n, row, out, k);
    if (s.computed == static_cast<int64_t>(s.tokens.size())) {
      if (const char* reason = append_token(s, out.drawn.at(next_draw++), version)) {
        finished.push_back(to_sample(s, reason));
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

std::vector<sample> scheduler::abort_all() {
  std::vector<sample> aborted;
  for (auto& s : running_) {
    aborted.push_back(to_sample(s, "abort"));
    free_sequence(s, false);
  }
  for (auto& s : waiting_) aborted.push_back(to_sample(s, "abort"));
  running_.clear();
  waiting_.clear();
  prompt_done_.clear();
  return aborted;
}

void scheduler::retract_all() {
  std::sort(running_.begin(), running_.end(),
            [](const sequence& a, const sequence& b) { return a.arrival > b.arrival; });
  for (auto& s : running_) {
    free_sequence(s, false);  // its KV was computed under the old weights
    waiting_.push_front(std::move(s));
  }
  running_.clear();
}

engine_stats scheduler::stats() const {
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
