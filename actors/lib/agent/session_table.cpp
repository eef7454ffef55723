#include "actors/lib/agent/session_table.hpp"

#include <cstdio>

namespace milesrt::agent {
namespace {

/// Closed sessions remembered for their ids.
constexpr size_t kRemembered = 1 << 16;

table_error refusal(table_error::kind what, std::string message) {
  return {what, std::move(message)};
}

}  // namespace

session_table::session_table(std::shared_ptr<const llm::tokenizer> tok,
                             std::shared_ptr<const llm::chat_template> tmpl,
                             session_table_limits limits)
    : tok_(std::move(tok)), tmpl_(std::move(tmpl)), limits_(limits) {}

std::string session_table::group_key(const std::string& group, const std::string& id) const {
  return group.empty() ? std::string(1, '\0') + id : group;
}

std::optional<table_error> session_table::open(const std::string& group,
                                               nlohmann::ordered_json metadata,
                                               clock::time_point now, std::string& id,
                                               const std::string& parent) {
  entry* up = nullptr;
  if (!parent.empty()) {
    table_error error;
    if (!find(parent, now, error)) return refusal(error.what, "parent: " + error.message);
    up = &sessions_.at(parent);
    if (!group.empty() && group != up->group)
      return refusal(table_error::kind::bad, "group: a subagent joins its parent's group '" +
                                                 up->group + "', not '" + group + "'");
  }
  if (open_ >= limits_.max_open) {
    ++counts_.refused_full;
    return refusal(table_error::kind::full,
                   std::to_string(open_) + " sessions are open, the most this server keeps");
  }
  std::string suffix;
  for (int i = 0; i < 4; ++i) {  // 4 x 32 bits
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random_()));
    suffix += word;
  }
  id = "s" + std::to_string(next_++) + "-" + suffix;
  entry e;
  e.group = up ? up->group : group;
  e.key = up ? up->key : group_key(group, id);
  e.tokens = std::make_unique<session_tree>(tok_, tmpl_, limits_.max_tokens, limits_.vocab_size,
                                            limits_.tree);
  e.metadata = std::move(metadata);
  e.last_use = now;
  e.parent = parent;
  if (up) up->children.push_back(id);
  groups_[e.key].members.push_back(id);
  sessions_.emplace(id, std::move(e));
  ++open_;
  ++counts_.opened;
  return std::nullopt;
}

const session_tree* session_table::peek(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() || it->second.st != state::open ? nullptr : it->second.tokens.get();
}

session_tree* session_table::find(const std::string& id, clock::time_point now,
                                  table_error& error) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    error = refusal(table_error::kind::unknown, "no session '" + id + "'");
    return nullptr;
  }
  if (it->second.st != state::open) {
    error = refusal(
        table_error::kind::ended,
        "session '" + id + "' has " + (it->second.st == state::ended ? "ended" : "been dropped"));
    return nullptr;
  }
  it->second.last_use = now;
  return it->second.tokens.get();
}

std::optional<table_error> session_table::end(const std::string& id, std::optional<double> reward,
                                              clock::time_point now,
                                              std::map<uint64_t, double> path_rewards) {
  table_error error;
  if (!find(id, now, error)) return error;
  const auto children = open_children(id);
  auto& e = sessions_.at(id);
  e.reward = reward;
  e.path_rewards = std::move(path_rewards);
  close(id, state::ended);
  ++counts_.ended;
  for (const auto& c : children) {  // a subagent ends with its parent, taking its reward
    close(c, state::ended);
    ++counts_.ended;
  }
  auto& g = groups_.at(e.key);
  if (!g.first_end) g.first_end = now;
  return std::nullopt;
}

std::optional<table_error> session_table::remove(const std::string& id, clock::time_point now) {
  table_error error;
  if (!find(id, now, error)) return error;
  for (const auto& c : open_children(id)) {
    close(c, state::dropped);
    ++counts_.deleted;
  }
  close(id, state::dropped);
  ++counts_.deleted;
  return std::nullopt;
}

std::vector<std::string> session_table::open_children(const std::string& id) const {
  std::vector<std::string> out;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return out;
  for (const auto& c : it->second.children) {
    auto child = sessions_.find(c);
    if (child == sessions_.end() || child->second.st != state::open) continue;
    out.push_back(c);
    for (auto& grandchild : open_children(c)) out.push_back(std::move(grandchild));
  }
  return out;
}

void session_table::close(const std::string& id, state to) {
  auto& e = sessions_.at(id);
  if (e.st == state::open) --open_;
  e.st = to;
  if (to == state::dropped) e.tokens.reset();
}

std::vector<finished_group> session_table::take_finished(clock::time_point now) {
  for (auto& [id, e] : sessions_) {
    if (e.st != state::open || now - e.last_use <= limits_.idle_timeout) continue;
    close(id, state::dropped);
    ++counts_.idle_dropped;
  }
  std::vector<finished_group> out;
  for (auto g = groups_.begin(); g != groups_.end();) {
    size_t open = 0, ended = 0;
    for (const auto& id : g->second.members) {
      const auto st = sessions_.at(id).st;
      open += st == state::open;
      ended += st == state::ended;
    }
    const bool waited_out =
        open > 0 && g->second.first_end && now - *g->second.first_end >= limits_.group_timeout;
    if (open > 0 && !waited_out) {
      ++g;
      continue;
    }
    const bool complete = ended == g->second.members.size();
    const bool hand_out = ended > 0 && (complete || limits_.partial_groups);
    finished_group f;
    f.group = sessions_.at(g->second.members.front()).group;
    f.complete = complete;
    for (const auto& id : g->second.members) {
      auto& e = sessions_.at(id);
      if (hand_out && e.st == state::ended)
        f.sessions.push_back({id, std::move(e.tokens), e.reward, std::move(e.path_rewards),
                              std::move(e.metadata), e.parent});
      if (e.st == state::open) {  // the group stopped waiting for it
        close(id, state::dropped);
        ++counts_.waited_out;
      }
      e.tokens.reset();
      closed_.push_back(id);
    }
    if (hand_out) {
      ++(complete ? counts_.groups_complete : counts_.groups_partial);
      out.push_back(std::move(f));
    } else if (ended > 0) {
      ++counts_.groups_dropped;
    }
    g = groups_.erase(g);
  }
  while (closed_.size() > kRemembered) {
    sessions_.erase(closed_.front());
    closed_.pop_front();
  }
  return out;
}

std::optional<std::string> session_table::state_of(const std::string& id) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  switch (it->second.st) {
    case state::open:
      return "open";
    case state::ended:
      return "ended";
    case state::dropped:
      return "dropped";
  }
  return std::nullopt;
}

}  // namespace milesrt::agent
