#pragma once
/// The sessions of a session server, by id: opened (optionally in a group), looked up, ended
/// (with an optional reward) or deleted; idle ones dropped; their count capped. Sessions opened
/// with the same group form one sample group: once one of them ends, the group waits for the
/// others up to a timeout, and is then handed out whole, or with the ended ones only, or dropped
/// (by `partial_groups`), each outcome counted. Owned by one actor; no locks, time passed in.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/lib/agent/session.hpp"

namespace milesrt::agent {

struct session_table_limits {
  /// Open sessions at most (opening another is refused).
  size_t max_open = 1024;
  /// A session with no request for this long is dropped (not trained).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
  /// After a group's first session ends, how long the group waits for the others.
  std::chrono::milliseconds group_timeout{std::chrono::minutes(10)};
  /// When the wait runs out: hand out the ended sessions (true) or drop the group (false).
  bool partial_groups = true;
  /// Each session's token limit (session::max_tokens; 0: none).
  size_t max_tokens = 0;
  /// The model's vocabulary: ids a harness sends at or past it are refused (0: not checked).
  int64_t vocab_size = 0;
};

/// Why a table operation was refused.
struct table_error {
  enum class kind {
    full,     ///< max_open sessions are open (HTTP 429)
    unknown,  ///< no such session (404)
    ended,    ///< the session has ended or was dropped (409)
  };
  kind what = kind::unknown;
  std::string message;
};

/// A session that ended, as it goes down the graph.
struct ended_session {
  std::string id;
  std::unique_ptr<session> tokens;
  std::optional<double> reward;
  nlohmann::ordered_json metadata;
};

/// A group handed out: its ended sessions, in the order they were opened.
struct finished_group {
  std::string group;  ///< "" for a session opened without one (a group of its own)
  std::vector<ended_session> sessions;
  bool complete = true;  ///< false: the wait ran out; these are the ones that had ended
};

/// What the table has done, for metrics.
struct session_table_counts {
  uint64_t opened = 0, ended = 0, deleted = 0, idle_dropped = 0, refused_full = 0;
  /// Open sessions dropped because their group stopped waiting for them.
  uint64_t waited_out = 0;
  uint64_t groups_complete = 0, groups_partial = 0, groups_dropped = 0;
};

class session_table {
 public:
  using clock = std::chrono::steady_clock;

  session_table(std::shared_ptr<const llm::tokenizer> tok,
                std::shared_ptr<const llm::chat_template> tmpl, session_table_limits limits);

  /// Opens a session in `group` ("": a group of its own); its id, or `full`. Ids carry 128
  /// random bits from the system's entropy source: a client of the same server cannot guess
  /// another's session (with the bearer secret, the id is the ownership of a session).
  std::optional<table_error> open(const std::string& group, nlohmann::ordered_json metadata,
                                  clock::time_point now, std::string& id);
  /// The open session `id` (its idle time starts again), or nullptr with `unknown` or `ended`.
  session* find(const std::string& id, clock::time_point now, table_error& error);
  /// Ends `id` with `reward` (none: the graph's reward actor scores it).
  std::optional<table_error> end(const std::string& id, std::optional<double> reward,
                                 clock::time_point now);
  /// Drops `id` without training on it (DELETE).
  std::optional<table_error> remove(const std::string& id, clock::time_point now);
  /// Drops the sessions idle past the limit, and hands out the groups that are done: every
  /// session ended or gone, or the wait run out.
  std::vector<finished_group> take_finished(clock::time_point now);

  /// The open session `id`, its idle time untouched; nullptr when it is not open.
  const session* peek(const std::string& id) const;
  /// "open", "ended" or "dropped" for a session the table knows; nullopt otherwise.
  std::optional<std::string> state_of(const std::string& id) const;
  const session_table_counts& counts() const { return counts_; }
  size_t open_count() const { return open_; }

 private:
  enum class state { open, ended, dropped };
  struct entry {
    std::string group;
    state st = state::open;
    std::unique_ptr<session> tokens;
    std::optional<double> reward;
    nlohmann::ordered_json metadata;
    clock::time_point last_use;
  };
  struct group_entry {
    std::vector<std::string> members;  // in the order opened
    std::optional<clock::time_point> first_end;
  };
  /// The group a session's group name stands for ("" : a group named by the session's id).
  std::string group_key(const std::string& group, const std::string& id) const;
  void close(const std::string& id, state to);

  std::shared_ptr<const llm::tokenizer> tok_;
  std::shared_ptr<const llm::chat_template> tmpl_;
  session_table_limits limits_;
  std::random_device random_;
  uint64_t next_ = 0;
  size_t open_ = 0;
  std::map<std::string, entry> sessions_;
  /// Sessions handed out or dropped, kept (without their tokens) so that a late request is told
  /// the session ended rather than that there is none; the oldest go past kRemembered.
  std::deque<std::string> closed_;
  std::map<std::string, group_entry> groups_;
  session_table_counts counts_;
};

}  // namespace milesrt::agent
