// Validation against the kinds: the graph's shape (runtime/graph/check_shape.hpp).
#include "runtime/graph/check_shape.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::graph::shape {
using runtime::kind_descriptor;
using runtime::port_spec;

const port_spec* find_port(const std::vector<port_spec>& ports, const std::string& name) {
  for (const auto& p : ports)
    if (p.name == name) return &p;
  return nullptr;
}

std::string union_member(schema::ActorSpec::Reader actor) {
  capnp::DynamicStruct::Reader params = capnp::toDynamic(actor.getParams());
  KJ_IF_MAYBE (field, params.which()) {
    return field->getProto().getName().cStr();
  }
  return "none";
}

std::string port_list(const std::vector<port_spec>& ports) {
  if (ports.empty()) return "none";
  std::string s;
  for (const auto& p : ports) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

namespace {

/// Whether an edge (parsed, both actors of known kinds) is a service edge.
bool service_edge(const kinds_by_actor& kind_of, const endpoint& from) {
  auto it = kind_of.find(from.actor);
  return it != kind_of.end() && is_service_edge(*it->second, from.port);
}

/// A service edge: the user's `uses` port to a `serves` port of the server, of one type, no
/// capacity (requests are the user's own, not work items the schedule counts).
void check_service_edge(schema::Edge::Reader edge, const endpoint& from, const endpoint& to,
                        const kind_descriptor& user, const kind_descriptor& server,
                        const std::string& where, const reporter& report) {
  const port_spec* up = find_port(user.uses, from.port);
  const port_spec* sp = find_port(server.serves, to.port);
  if (sp == nullptr) {
    report(where, "field 'to': " + from.actor + "." + from.port + " uses a service, but actor '" +
                      to.actor + "' (kind " + server.name + ") serves no port '" + to.port +
                      "' (serves: " + port_list(server.serves) + ")");
  } else if (up->type != sp->type) {
    report(where, "service type mismatch: " + from.actor + "." + from.port + " uses '" + up->type +
                      "' but " + to.actor + "." + to.port + " serves '" + sp->type + "'");
  }
  if (from.actor == to.actor) report(where, "an actor cannot use a service of its own");
  if (edge.getCapacity() != 0) {
    report(where, "field 'capacity': a service edge carries requests, not work items (0 only)");
  }
}

/// Each `uses` port of each actor is joined to exactly one server.
void check_uses_joined(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                       const std::map<std::string, unsigned>& joined, const reporter& report) {
  for (auto actor : graph.getActors()) {
    auto it = kind_of.find(actor.getName());
    if (it == kind_of.end()) continue;
    for (const auto& p : it->second->uses) {
      const std::string key = std::string(actor.getName()) + "." + p.name;
      auto n = joined.find(key);
      const unsigned count = n == joined.end() ? 0 : n->second;
      if (count != 1) {
        report("actor '" + std::string(actor.getName()) + "'",
               "port '" + p.name + "' uses a service of type '" + p.type + "': " +
                   (count == 0 ? "no edge joins it to a server (add (from = \"" + key +
                                     "\", to = \"SERVER.PORT\"))"
                               : std::to_string(count) + " edges join it, one may"));
      }
    }
  }
}

}  // namespace

/// Edges: ports exist on the kinds and carry the same type. Returns who feeds whom (a service's
/// user feeds its server: the server is driven by its users' requests).
std::map<std::string, std::set<std::string>> check_edges(schema::Graph::Reader graph,
                                                         const kinds_by_actor& kind_of,
                                                         const reporter& report) {
  std::map<std::string, std::set<std::string>> downstream;
  std::map<std::string, unsigned> joined;
  unsigned i = 0;
  for (auto edge : graph.getEdges()) {
    endpoint from, to;
    std::string where = edge_where(i++, edge);
    if (!parse_endpoint(edge.getFrom(), from) || !parse_endpoint(edge.getTo(), to)) continue;
    auto fk = kind_of.find(from.actor), tk = kind_of.find(to.actor);
    if (fk == kind_of.end() || tk == kind_of.end()) continue;
    downstream[from.actor].insert(to.actor);
    if (is_service_edge(*fk->second, from.port)) {
      joined[from.actor + "." + from.port]++;
      check_service_edge(edge, from, to, *fk->second, *tk->second, where, report);
      continue;
    }
    const port_spec* op = find_port(fk->second->outputs, from.port);
    const port_spec* ip = find_port(tk->second->inputs, to.port);
    if (op == nullptr) {
      report(where, "field 'from': actor '" + from.actor + "' (kind " + fk->second->name +
                        ") has no output port '" + from.port +
                        "' (outputs: " + port_list(fk->second->outputs) +
                        (fk->second->uses.empty() ? "" : "; uses: " + port_list(fk->second->uses)) +
                        ")");
    }
    if (ip == nullptr) {
      const bool served = find_port(tk->second->serves, to.port) != nullptr;
      report(where, "field 'to': actor '" + to.actor + "' (kind " + tk->second->name +
                        ") has no input port '" + to.port +
                        "' (inputs: " + port_list(tk->second->inputs) + ")" +
                        (served ? "; '" + to.port +
                                      "' is a service it serves: join a uses port "
                                      "to it, not an output"
                                : ""));
    }
    if (op != nullptr && ip != nullptr && op->type != ip->type) {
      report(where, "port type mismatch: " + from.actor + "." + from.port + " carries '" +
                        op->type + "' but " + to.actor + "." + to.port + " takes '" + ip->type +
                        "'");
    }
  }
  check_uses_joined(graph, kind_of, joined, report);
  return downstream;
}

roles roles_of(schema::Graph::Reader graph, const kinds_by_actor& kind_of) {
  roles r;
  for (auto actor : graph.getActors()) {
    auto it = kind_of.find(actor.getName());
    if (it == kind_of.end()) continue;
    if (it->second->role == runtime::role::source) r.sources.push_back(it->first);
    if (it->second->role == runtime::role::learner) r.learners.push_back(it->first);
    if (it->second->role == runtime::role::buffer) r.buffers.push_back(it->first);
  }
  return r;
}

/// One or more sources (mixed by weight, which only sources have), one or more learners, at most
/// one buffer actor (and then one learner).
void check_roles(schema::Graph::Reader graph, const roles& r, const reporter& report) {
  if (r.sources.empty()) {
    report("graph",
           "field 'actors': the schedule needs a source actor (one, or several mixed by weight), "
           "found none");
  }
  for (auto actor : graph.getActors()) {
    const std::string name = actor.getName();
    const double w = actor.getWeight();
    const bool is_source = std::find(r.sources.begin(), r.sources.end(), name) != r.sources.end();
    if (!(w >= 0) || std::isinf(w)) {
      report("actor '" + name + "'",
             "field 'weight': " + std::to_string(w) + " is not a finite weight >= 0");
    } else if (w > 0 && !is_source) {
      report("actor '" + name + "'", "field 'weight': only sources are mixed by weight (kind '" +
                                         std::string(actor.getKind()) + "' is not a source)");
    }
  }
  if (r.learners.empty()) {
    report("graph", "field 'actors': the schedule needs a learner actor, found none");
  }
  if (r.learners.size() > 1 && !r.buffers.empty()) {
    report("graph", "field 'actors': a graph with a buffer actor drives one learner, found " +
                        std::to_string(r.learners.size()) + " (" + r.learners[0] + ", " +
                        r.learners[1] + (r.learners.size() > 2 ? ", ..." : "") + ")");
  }
  if (r.buffers.size() > 1) {
    report("graph",
           "field 'actors': a graph holds at most one buffer actor (the learner's), found " +
               std::to_string(r.buffers.size()) + ": " + r.buffers[0] + ", " + r.buffers[1]);
  }
}

/// The buffer sits between the stages and the learner: it alone feeds the learner, and it feeds
/// nothing else.
void check_buffer_edges(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                        const std::string& learner, const std::string& buffer,
                        const reporter& report) {
  unsigned e = 0;
  bool feeds_learner = false;
  for (auto edge : graph.getEdges()) {
    endpoint from, to;
    std::string where = edge_where(e++, edge);
    if (!parse_endpoint(edge.getFrom(), from) || !parse_endpoint(edge.getTo(), to)) continue;
    if (service_edge(kind_of, from)) continue;
    if (to.actor == learner && from.actor != buffer) {
      report(where, "the learner '" + learner + "' takes its batches from the buffer '" + buffer +
                        "' only: route " + from.actor + "." + from.port +
                        " into the buffer instead");
    }
    if (from.actor == buffer && to.actor != learner) {
      report(where, "the buffer '" + buffer + "' feeds the learner '" + learner + "' only");
    }
    feeds_learner = feeds_learner || (from.actor == buffer && to.actor == learner);
  }
  if (!feeds_learner) {
    report("actor '" + buffer + "'",
           "no edge leads from the buffer to the learner '" + learner + "'");
  }
}

/// An edge into the learner (or its buffer actor) bounds what the learner's buffer holds, which
/// must be a whole batch.
void check_feed_capacity(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                         const std::string& feed, const reporter& report) {
  const uint32_t batch = graph.getRun().getBatchSize();
  unsigned e = 0;
  for (auto edge : graph.getEdges()) {
    endpoint from, to;
    std::string where = edge_where(e++, edge);
    if (!parse_endpoint(edge.getTo(), to) || to.actor != feed) continue;
    if (parse_endpoint(edge.getFrom(), from) && service_edge(kind_of, from)) continue;
    if (edge.getCapacity() != 0 && edge.getCapacity() < batch) {
      report(where,
             "field 'capacity': " + std::to_string(edge.getCapacity()) +
                 " is below run.batchSize " + std::to_string(batch) +
                 ": the learner's buffer could never hold a batch (0: the schedule's window)");
    }
  }
}

/// Every actor must be reachable from a source.
void check_reachable(schema::Graph::Reader graph, const std::vector<std::string>& sources,
                     std::map<std::string, std::set<std::string>>& downstream,
                     const reporter& report) {
  std::set<std::string> reached(sources.begin(), sources.end());
  std::queue<std::string> todo;
  for (const auto& s : sources) todo.push(s);
  while (!todo.empty()) {
    auto n = todo.front();
    todo.pop();
    for (const auto& d : downstream[n])
      if (reached.insert(d).second) todo.push(d);
  }
  for (auto actor : graph.getActors()) {
    if (reached.count(actor.getName()) == 0) {
      report("actor '" + std::string(actor.getName()) + "'",
             "no schedule can drive it: no path of edges leads to it from " +
                 (sources.size() == 1 ? "the source '" + sources[0] + "'"
                                      : std::string("any source")));
    }
  }
}

/// The kinds' checks that need an actor's neighbours (check_in_graph).
void check_in_graph(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                    const reporter& report) {
  std::map<std::string, std::string> placement;
  for (auto actor : graph.getActors()) placement[actor.getName()] = actor.getPlacement();
  std::map<std::string, runtime::actor_in_graph> ctx;
  for (auto edge : graph.getEdges()) {
    endpoint from, to;
    if (!parse_endpoint(edge.getFrom(), from) || !parse_endpoint(edge.getTo(), to)) continue;
    auto fk = kind_of.find(from.actor), tk = kind_of.find(to.actor);
    if (fk == kind_of.end() || tk == kind_of.end()) continue;
    if (is_service_edge(*fk->second, from.port)) continue;
    ctx[to.actor].upstream.push_back(
        {from.actor, fk->second->name, placement[from.actor], to.port});
    ctx[from.actor].downstream.push_back(
        {to.actor, tk->second->name, placement[to.actor], from.port});
  }
  for (auto actor : graph.getActors()) {
    const std::string name = actor.getName();
    const kind_descriptor* kind = kind_of.at(name);
    const std::string member = union_member(actor);
    if (!kind->check_in_graph || kind->params_member.empty() ||
        !params_member_problem(*kind).empty() ||
        (member != "none" && member != kind->params_member))
      continue;
    auto& c = ctx[name];
    c.name = name;
    c.placement = placement[name];
    c.batch_size = graph.getRun().getBatchSize();
    std::shared_ptr<capnp::MallocMessageBuilder> storage;
    for (const auto& problem :
         kind->check_in_graph(params_struct(actor, kind->params_member, storage), c)) {
      report("actor '" + name + "'", within("params." + kind->params_member, problem));
    }
  }
}

/// The kinds' graph_settings: every actor stating a setting states the value the first one does.
void check_settings_agree(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                          const reporter& report) {
  struct stated {
    std::string actor, field, value;
  };
  std::map<std::string, stated> first;
  for (auto actor : graph.getActors()) {
    const std::string name = actor.getName();
    const kind_descriptor* kind = kind_of.at(name);
    const std::string member = union_member(actor);
    if (!kind->graph_settings || kind->params_member.empty() ||
        !params_member_problem(*kind).empty() ||
        (member != "none" && member != kind->params_member))
      continue;
    std::shared_ptr<capnp::MallocMessageBuilder> storage;
    for (auto& s : kind->graph_settings(params_struct(actor, kind->params_member, storage))) {
      auto [it, added] = first.emplace(s.name, stated{name, s.field, s.value});
      if (added || it->second.value == s.value) continue;
      report("actor '" + name + "'",
             "params." + kind->params_member + "." + s.field + ": '" + s.value + "' here but '" +
                 it->second.value + "' on actor '" + it->second.actor + "' (" + it->second.field +
                 "); every actor stating " + s.name + " must state the same");
    }
  }
}

}  // namespace milesrt::graph::shape
