// What a trajectory tree trains on, and how GET /sessions/{id} shows it: its paths, and its nodes
// (the paths' tokens with their common prefixes merged, a radix tree over (id, origin) pairs).
#include <algorithm>

#include "actors/lib/agent/session_tree.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

session_tokens prefix(const session_tokens& t, size_t n) {
  session_tokens p;
  p.ids.assign(t.ids.begin(), t.ids.begin() + std::ptrdiff_t(n));
  p.origins.assign(t.origins.begin(), t.origins.begin() + std::ptrdiff_t(n));
  p.logprobs.assign(t.logprobs.begin(), t.logprobs.begin() + std::ptrdiff_t(n));
  p.versions.assign(t.versions.begin(), t.versions.begin() + std::ptrdiff_t(n));
  return p;
}

size_t sampled_count(const session_tokens& t) {
  return size_t(std::count(t.origins.begin(), t.origins.end(), token_origin::sampled));
}

/// A node of the merged tree: tokens [from, to) of path `source`'s sequence.
struct node {
  std::optional<size_t> parent;
  const session_tokens* source = nullptr;
  size_t from = 0, to = 0;
  std::vector<size_t> children;
  std::vector<uint64_t> paths, ends;
};

bool same_token(const session_tokens& a, size_t i, const session_tokens& b, size_t j) {
  return a.ids[i] == b.ids[j] && a.origins[i] == b.origins[j];
}

/// Splits node `n` after `k` of its tokens: the rest becomes its one child.
void split(std::vector<node>& nodes, size_t n, size_t k) {
  node rest = nodes[n];
  rest.parent = n;
  rest.from = nodes[n].from + k;
  const size_t r = nodes.size();
  for (size_t c : rest.children) nodes[c].parent = r;
  nodes.push_back(std::move(rest));
  nodes[n].to = nodes[n].from + k;
  nodes[n].children = {r};
  nodes[n].ends.clear();
}

void insert(std::vector<node>& nodes, const session_tokens& t, uint64_t id) {
  size_t cur = 0, pos = 0;
  nodes[0].paths.push_back(id);
  while (pos < t.size()) {
    std::optional<size_t> next;
    for (size_t c : nodes[cur].children)
      if (same_token(*nodes[c].source, nodes[c].from, t, pos)) next = c;
    if (!next) {
      nodes.push_back({cur, &t, pos, t.size(), {}, {id}, {id}});
      nodes[cur].children.push_back(nodes.size() - 1);
      return;
    }
    const size_t c = *next;
    size_t k = 0;
    while (nodes[c].from + k < nodes[c].to && pos + k < t.size() &&
           same_token(*nodes[c].source, nodes[c].from + k, t, pos + k))
      ++k;
    if (nodes[c].from + k < nodes[c].to) split(nodes, c, k);
    nodes[c].paths.push_back(id);
    pos += k;
    cur = c;
  }
  nodes[cur].ends.push_back(id);
}

}  // namespace

std::vector<tree_trajectory> session_tree::trained(train_on which) const {
  std::vector<tree_trajectory> out;
  if (which == train_on::last_leaf) {
    out.push_back({current_id(), current().tokens()});
    return out;
  }
  for (const auto& p : paths_) {
    const auto& starts = p.s->starts();
    if (which == train_on::all) {
      // The path as it stood after each of its own sampled turns that a later request continued.
      for (size_t k = p.own_from; k < starts.size(); ++k)
        if (starts[k].turns > 0) out.push_back({p.id, prefix(p.s->tokens(), starts[k].tokens)});
    }
    out.push_back({p.id, p.s->tokens()});
  }
  return out;
}

ojson session_tree::describe(bool with_ids) const {
  ojson trajectories = ojson::array();
  std::vector<node> nodes(1);  // the root: no tokens
  for (const auto& p : paths_) {
    const auto& t = p.s->tokens();
    trajectories.push_back({{"id", p.id},
                            {"parent", p.parent ? ojson(*p.parent) : ojson(nullptr)},
                            {"turns", p.s->turns()},
                            {"tokens", t.size()},
                            {"sampled_tokens", sampled_count(t)},
                            {"current", p.id == current_id()}});
    insert(nodes, t, p.id);
  }
  ojson out_nodes = ojson::array();
  for (size_t n = 1; n < nodes.size(); ++n) {
    const auto& x = nodes[n];
    ojson node = {{"id", n},
                  {"parent", x.parent && *x.parent > 0 ? ojson(*x.parent) : ojson(nullptr)},
                  {"position", x.from},
                  {"tokens", x.to - x.from},
                  {"trajectories", x.paths},
                  {"ends", x.ends}};
    if (with_ids) {
      std::vector<llm::token_id> ids(x.source->ids.begin() + std::ptrdiff_t(x.from),
                                     x.source->ids.begin() + std::ptrdiff_t(x.to));
      std::vector<int> mask;
      for (size_t i = x.from; i < x.to; ++i)
        mask.push_back(x.source->origins[i] == token_origin::sampled ? 1 : 0);
      node["token_ids"] = ids;
      node["loss_mask"] = mask;
    }
    out_nodes.push_back(std::move(node));
  }
  return {{"trajectories", trajectories}, {"nodes", out_nodes}};
}

}  // namespace milesrt::agent
