// A session's trajectory tree: which path a request extends, and where it branches when it
// extends none. A path's starts (where it stood as each of its requests began) are the places a
// request may branch from: the state there is a whole conversation, its last turn closed, so
// extending it with the request is what a session does with any request. The deepest start a
// request repeats (the most messages, or ids, of its history) is the branch point; the shared
// prefix's tokens are copied as stored.
#include "actors/lib/agent/session_tree.hpp"

#include <stdexcept>

namespace milesrt::agent {

session_tree::session_tree(std::shared_ptr<const llm::tokenizer> tok,
                           std::shared_ptr<const llm::chat_template> tmpl, size_t max_tokens,
                           int64_t vocab_size, tree_limits limits)
    : tok_(std::move(tok)),
      tmpl_(std::move(tmpl)),
      max_tokens_(max_tokens),
      vocab_size_(vocab_size),
      limits_(limits) {
  path first;
  first.id = next_id_++;
  first.s = std::make_unique<session>(tok_, tmpl_, max_tokens_, vocab_size_);
  first.own_from = 1;  // start 0, the empty session, holds no turn
  paths_.push_back(std::move(first));
}

bool session_tree::any_sampled() const {
  for (const auto& p : paths_)
    if (p.s->turns() > 0) return true;
  return false;
}

bool session_tree::has_path(uint64_t id) const {
  for (const auto& p : paths_)
    if (p.id == id) return true;
  return false;
}

tree_mark session_tree::mark() const {
  tree_mark m;
  m.current = current_;
  for (const auto& p : paths_) m.paths.push_back(p.s->mark());
  return m;
}

void session_tree::undo(const tree_mark& m) {
  if (paths_.size() > m.paths.size()) paths_.resize(m.paths.size());
  for (size_t i = 0; i < paths_.size(); ++i) paths_[i].s->undo(m.paths[i]);
  current_ = std::min(m.current, paths_.size() - 1);
}

namespace {

extend_result limit_passed(std::string message, std::optional<size_t> index) {
  return {0, session_error{session_error::kind::limit, std::move(message), index}};
}

}  // namespace

extend_result session_tree::extend(const nlohmann::ordered_json& messages,
                                   const llm::chat_options& options) {
  return extend_any([&](session& s) { return s.extend(messages, options); }, false);
}

extend_result session_tree::extend_ids(const std::vector<llm::token_id>& ids) {
  return extend_any([&](session& s) { return s.extend_ids(ids); }, true);
}

template <class Extend>
extend_result session_tree::extend_any(Extend extend, bool by_ids) {
  using kind = session_error::kind;
  auto first = extend(current());
  if (!first.error || first.error->what != kind::not_an_extension) return first;
  // How much of each path's history the request repeats (messages, or ids); nullopt: the path
  // cannot take the request for another reason (its mode, its length).
  std::vector<std::optional<size_t>> at(paths_.size());
  at[current_] = first.error->index.value_or(0);
  for (size_t i = 0; i < paths_.size(); ++i) {
    if (i == current_) continue;
    auto r = extend(*paths_[i].s);
    if (!r.error) {
      current_ = i;  // an older path the request extends: it goes on there
      return r;
    }
    if (r.error->what == kind::not_an_extension) at[i] = r.error->index.value_or(0);
  }
  if (!limits_.branching) return first;
  // The deepest start any path has that the request repeats; on a tie the current path, then
  // the newest.
  std::optional<std::pair<size_t, size_t>> best;  // path, start
  size_t best_depth = 0;
  std::vector<size_t> order{current_};
  for (size_t i = paths_.size(); i-- > 0;)
    if (i != current_) order.push_back(i);
  for (const size_t i : order) {
    if (!at[i]) continue;
    const auto& starts = paths_[i].s->starts();
    for (size_t j = 0; j < starts.size(); ++j) {
      const size_t depth = by_ids ? starts[j].tokens : starts[j].messages;
      if (depth > *at[i] || (best && depth <= best_depth)) continue;
      best = std::pair{i, j};
      best_depth = depth;
    }
  }
  if (!best) return first;
  const auto& from = paths_[best->first];
  const session_mark start = from.s->starts()[best->second];
  const size_t rollback = from.s->turns() - start.turns;
  if (rollback > limits_.max_rollback)
    return limit_passed("maxRollbackTurns: the request departs from the session's history " +
                            std::to_string(rollback) + " sampled turns back, past the limit of " +
                            std::to_string(limits_.max_rollback),
                        first.error->index);
  if (paths_.size() >= limits_.max_branches)
    return limit_passed("maxBranches: the session has " + std::to_string(paths_.size()) +
                            " trajectories, the most it may branch into",
                        first.error->index);
  path branch;
  branch.id = next_id_++;
  branch.s = std::make_unique<session>(*from.s);
  branch.s->undo(start);
  branch.parent = from.id;
  branch.own_from = best->second + 1;
  auto r = extend(*branch.s);
  if (r.error) return r;  // the branch is not kept
  paths_.push_back(std::move(branch));
  current_ = paths_.size() - 1;
  return r;
}

}  // namespace milesrt::agent
