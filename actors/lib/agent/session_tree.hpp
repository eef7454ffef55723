#pragma once
/// A session's trajectory tree. Agent harnesses do not keep one line of history: they retry a
/// turn, edit a tool result, compact a long context by replacing its early turns with a summary.
/// A request whose messages (or ids) depart from the stored path branches at the deepest place a
/// stored path matches it: a new path is the old one taken back to the start of the deepest
/// request whose history the new one repeats (its tokens kept as stored: sampled tokens are
/// never tokenized again), then extended by the request as any session is. Every path is a
/// trajectory from the root to a leaf with its own tokens, mask, log-probs and versions; a
/// request that extends any path (the latest or an older one) continues that path.
///
/// Bounds: `max_branches` paths (the first included), and a branch may take back at most
/// `max_rollback` sampled turns of the path it leaves; passing either is refused (409) naming
/// it. With `branching` off a departing request is refused as before (409).

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/lib/agent/session.hpp"

namespace milesrt::agent {

struct tree_limits {
  bool branching = true;
  /// Paths at most (a branch past it is refused).
  size_t max_branches = 64;
  /// Sampled turns a branch may take back of the path it departs from.
  size_t max_rollback = 256;
};

/// Which paths of a tree train: every leaf; the path the session's last request extended; or
/// every trajectory the tree holds (each leaf, and each path as it stood after each sampled turn
/// that was later continued: the turns of every request, each once).
enum class train_on { leaves, last_leaf, all };

/// Where a tree stood before a request: undo() takes back what the request did (a branch it
/// made, a path it extended).
struct tree_mark {
  std::vector<session_mark> paths;
  size_t current = 0;
};

/// One trajectory to train on: the path it belongs to and its tokens (a whole path, or, for
/// train_on::all, a path up to the end of one of its turns).
struct tree_trajectory {
  uint64_t path = 0;
  session_tokens tokens;
};

class session_tree {
 public:
  session_tree(std::shared_ptr<const llm::tokenizer> tok,
               std::shared_ptr<const llm::chat_template> tmpl, size_t max_tokens = 0,
               int64_t vocab_size = 0, tree_limits limits = {});

  /// session::extend on the path the request extends, or on a new branch (see above).
  extend_result extend(const nlohmann::ordered_json& messages, const llm::chat_options& options);
  /// session::extend_ids likewise, matching ids.
  extend_result extend_ids(const std::vector<llm::token_id>& ids);

  /// The path the last request extended (a turn's sampled tokens go there).
  session& current() { return *paths_[current_].s; }
  const session& current() const { return *paths_[current_].s; }
  uint64_t current_id() const { return paths_[current_].id; }
  const session_tokens& tokens() const { return current().tokens(); }
  const nlohmann::ordered_json& messages() const { return current().messages(); }
  size_t turns() const { return current().turns(); }
  /// Sampled turns on any path.
  bool any_sampled() const;
  size_t path_count() const { return paths_.size(); }
  /// Whether `id` names one of the paths.
  bool has_path(uint64_t id) const;

  tree_mark mark() const;
  void undo(const tree_mark& m);

  /// The trajectories that train, by `which`, in the order their paths were made.
  std::vector<tree_trajectory> trained(train_on which) const;
  /// The tree as GET /sessions/{id} shows it: its paths ("trajectories": id, the path it
  /// branched from, turns, tokens, sampled tokens, whether it is the current one) and its nodes
  /// ("nodes": the paths' common token prefixes merged; each node its parent, the position of
  /// its first token, its token count, the paths through it and those it ends; `with_ids`: its
  /// stored ids and mask too).
  nlohmann::ordered_json describe(bool with_ids = true) const;

 private:
  struct path {
    uint64_t id = 0;
    std::unique_ptr<session> s;
    /// The path it branched from (none for the first), and its first own start: the starts
    /// before it are its parent's.
    std::optional<uint64_t> parent;
    size_t own_from = 0;
  };
  /// The request as `extend` (one path's session::extend or extend_ids) takes it: on the
  /// current path, else on another path it extends, else on a new branch off the deepest start
  /// it repeats (`by_ids`: counted in ids, else in messages), the limits checked first. A
  /// refusal other than "not an extension" is the current path's answer.
  template <class Extend>
  extend_result extend_any(Extend extend, bool by_ids);

  std::shared_ptr<const llm::tokenizer> tok_;
  std::shared_ptr<const llm::chat_template> tmpl_;
  size_t max_tokens_ = 0;
  int64_t vocab_size_ = 0;
  tree_limits limits_;
  std::vector<path> paths_;
  size_t current_ = 0;
  uint64_t next_id_ = 0;
};

}  // namespace milesrt::agent
