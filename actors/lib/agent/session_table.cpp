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
                                               clock::time_point now, std::string& id) {
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
  e.group = group;
  e.tokens = std::make_unique<session>(tok_, tmpl_, limits_.max_tokens, limits_.vocab_size);
  e.metadata = std::move(metadata);
  e.last_use = now;
  sessions_.emplace(id, std::move(e));
  groups_[group_key(group, id)].members.push_back(id);
  ++open_;
  ++counts_.opened;
  return std::nullopt;
}

const session* session_table::peek(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() || it->second.st != state::open ? nullptr : it->second.tokens.get();
}

session* session_table::find(const std::string& id, clock::time_point now, table_error& error) {
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
                                              clock::time_point now) {
  table_error error;
  if (!find(id, now, error)) return error;
  auto& e = sessions_.at(id);
  e.reward = reward;
  close(id, state::ended);
  ++counts_.ended;
  auto& g = groups_.at(group_key(e.group, id));
  if (!g.first_end) g.first_end = now;
  return std::nullopt;
}

std::optional<table_error> session_table::remove(const std::string& id, clock::time_point now) {
  table_error error;
  if (!find(id, now, error)) return error;
  close(id, state::dropped);
  ++counts_.deleted;
  return std::nullopt;
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
        f.sessions.push_back({id, std::move(e.tokens), e.reward, std::move(e.metadata)});
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
