#include "runtime/graph/validate.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace milesrt::graph {

namespace {

/// Letters, digits and '_', not starting with a digit: checked character by character (a
/// std::regex recurses per character and overflows the stack on long input).
bool is_identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

/// A positive, finite duration in seconds below limits::max_seconds, or "" when it is one.
std::string seconds_problem(double v, bool zero_allowed) {
  if (std::isnan(v) || v < 0 || (!zero_allowed && v == 0) || v > limits::max_seconds) {
    char max[32];
    std::snprintf(max, sizeof max, "%g", limits::max_seconds);
    return std::string("must be ") + (zero_allowed ? "between 0" : "above 0") + " and at most " +
           max + " seconds (finite)";
  }
  return "";
}

}  // namespace

bool parse_endpoint(const std::string& text, endpoint& out) {
  auto dot = text.find('.');
  if (dot == std::string::npos) return false;
  endpoint ep{text.substr(0, dot), text.substr(dot + 1)};
  if (!is_identifier(ep.actor) || !is_identifier(ep.port)) return false;
  out = std::move(ep);
  return true;
}

namespace {

/// Adds "file: where: what" to a list of problems.
using reporter = std::function<void(const std::string& where, const std::string& what)>;

/// The actors' names, kinds, replicas and deadlines; returns name -> index of the named ones.
std::map<std::string, unsigned> check_actors(schema::Graph::Reader graph, const reporter& report) {
  std::map<std::string, unsigned> actor_index;
  unsigned i = 0;
  for (auto actor : graph.getActors()) {
    std::string name = actor.getName();
    std::string where = name.empty() ? "actors[" + std::to_string(i) + "]" : "actor '" + name + "'";
    if (name.size() > limits::max_name) {
      where = "actors[" + std::to_string(i) + "]";
      report(where, "field 'name': longer than " + std::to_string(limits::max_name) +
                        " characters (" + std::to_string(name.size()) + ")");
    } else if (name.empty()) {
      report(where, "field 'name': must not be empty");
    } else if (!is_identifier(name)) {
      report(where, "field 'name': must be an identifier (letters, digits, '_')");
    } else if (!actor_index.emplace(name, i).second) {
      report(where, "field 'name': duplicate actor name (also actors[" +
                        std::to_string(actor_index[name]) + "])");
    }
    if (actor.getKind().size() == 0) report(where, "field 'kind': must not be empty");
    if (actor.getReplicas() == 0) report(where, "field 'replicas': must be at least 1");
    if (actor.getReplicas() > limits::max_replicas) {
      report(where, "field 'replicas': at most " + std::to_string(limits::max_replicas));
    }
    // NaN and negative values are check_kinds' to report.
    if (actor.getDeadlineSeconds() > limits::max_seconds) {
      report(where, "field 'deadlineSeconds': " +
                        seconds_problem(actor.getDeadlineSeconds(), true) + " (0: the run's)");
    }
    ++i;
  }
  return actor_index;
}

/// Each edge's two endpoints name an actor's port; no edge twice.
void check_edges(schema::Graph::Reader graph, const std::map<std::string, unsigned>& actor_index,
                 const reporter& report) {
  std::set<std::pair<std::string, std::string>> seen_edges;
  unsigned i = 0;
  for (auto edge : graph.getEdges()) {
    std::string from = edge.getFrom(), to = edge.getTo();
    const size_t longest = 2 * limits::max_name + 1;
    std::string where =
        "edge " + std::to_string(i) +
        (from.size() > longest || to.size() > longest ? "" : " (" + from + " -> " + to + ")");
    for (auto [field, text] : {std::pair{"from", from}, std::pair{"to", to}}) {
      endpoint ep;
      if (text.size() > longest) {
        report(where, std::string("field '") + field + "': longer than " + std::to_string(longest) +
                          " characters (" + std::to_string(text.size()) + ")");
      } else if (!parse_endpoint(text, ep)) {
        report(where,
               std::string("field '") + field + "': expected \"actor.port\", got \"" + text + "\"");
      } else if (actor_index.count(ep.actor) == 0) {
        report(where, std::string("field '") + field + "': no actor named '" + ep.actor + "'");
      }
    }
    if (!seen_edges.emplace(from, to).second) report(where, "duplicate edge");
    ++i;
  }
}

/// The run section's bounds, and the async schedule's window.
void check_run(schema::Graph::Reader graph, const reporter& report) {
  auto run = graph.getRun();
  if (run.getSteps() == 0) report("run", "field 'steps': must be at least 1");
  if (run.getSteps() > limits::max_steps) {
    report("run", "field 'steps': at most " + std::to_string(limits::max_steps));
  }
  if (run.getDir().size() == 0) report("run", "field 'dir': must not be empty");
  if (run.getBatchSize() > limits::max_batch) {
    report("run", "field 'batchSize': at most " + std::to_string(limits::max_batch));
  } else if (graph.getSchedule().isAsync()) {
    // The schedule's window: what it keeps open at once, (maxStaleness + 1) x batchSize items.
    const uint64_t batch = run.getBatchSize() == 0 ? 1 : run.getBatchSize();
    const uint64_t window =
        (uint64_t(graph.getSchedule().getAsync().getMaxStaleness()) + 1) * batch;
    if (window > limits::max_window) {
      report("schedule", "field 'async.maxStaleness': (maxStaleness + 1) x batchSize is " +
                             std::to_string(window) + " items, at most " +
                             std::to_string(limits::max_window));
    }
  }
  for (auto [field, value, zero] :
       {std::tuple{"deadlineSeconds", run.getDeadlineSeconds(), false},
        std::tuple{"workerWaitSeconds", run.getWorkerWaitSeconds(), false},
        std::tuple{"workerGraceSeconds", run.getWorkerGraceSeconds(), true},
        std::tuple{"restartWindowSeconds", run.getRestartWindowSeconds(), false}}) {
    if (auto p = seconds_problem(value, zero); !p.empty())
      report("run", std::string("field '") + field + "': " + p);
  }
}

}  // namespace

problem_list validate_structure(const loaded_graph& g) {
  problem_list out;
  const std::string file = g.file().string();
  const reporter report = [&](const std::string& where, const std::string& what) {
    out.push_back(place_problem(file, where, what));
  };
  auto graph = g.reader();
  if (graph.getActors().size() == 0)
    report("graph", "field 'actors': a graph needs at least one actor");
  const auto actor_index = check_actors(graph, report);
  check_edges(graph, actor_index, report);
  check_run(graph, report);
  return out;
}

}  // namespace milesrt::graph
