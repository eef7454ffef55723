#include "runtime/graph/validate.hpp"

#include <map>
#include <regex>
#include <set>

namespace milesrt::graph {

bool parse_endpoint(const std::string& text, endpoint& out) {
  static const std::regex form(R"(^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$)");
  std::smatch m;
  if (!std::regex_match(text, m, form)) return false;
  out = {m[1].str(), m[2].str()};
  return true;
}

namespace {

bool is_identifier(const std::string& s) {
  static const std::regex form(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
  return std::regex_match(s, form);
}

}  // namespace

std::vector<diagnostic> validate_structure(const loaded_graph& g) {
  std::vector<diagnostic> out;
  const std::string file = g.file().string();
  auto report = [&](const std::string& where, const std::string& what) {
    out.push_back({file + ": " + where + ": " + what});
  };
  auto graph = g.reader();

  if (graph.getActors().size() == 0) report("graph", "field 'actors': a graph needs at least one actor");

  std::map<std::string, unsigned> actor_index;
  unsigned i = 0;
  for (auto actor : graph.getActors()) {
    std::string name = actor.getName();
    std::string where = name.empty() ? "actors[" + std::to_string(i) + "]"
                                     : "actor '" + name + "'";
    if (name.empty()) {
      report(where, "field 'name': must not be empty");
    } else if (!is_identifier(name)) {
      report(where, "field 'name': must be an identifier (letters, digits, '_')");
    } else if (!actor_index.emplace(name, i).second) {
      report(where, "field 'name': duplicate actor name (also actors[" +
                        std::to_string(actor_index[name]) + "])");
    }
    if (actor.getKind().size() == 0) report(where, "field 'kind': must not be empty");
    if (actor.getReplicas() == 0) report(where, "field 'replicas': must be at least 1");
    ++i;
  }

  std::set<std::pair<std::string, std::string>> seen_edges;
  i = 0;
  for (auto edge : graph.getEdges()) {
    std::string from = edge.getFrom(), to = edge.getTo();
    std::string where = "edge " + std::to_string(i) + " (" + from + " -> " + to + ")";
    for (auto [field, text] : {std::pair{"from", from}, std::pair{"to", to}}) {
      endpoint ep;
      if (!parse_endpoint(text, ep)) {
        report(where, std::string("field '") + field + "': expected \"actor.port\", got \"" + text +
                          "\"");
      } else if (actor_index.count(ep.actor) == 0) {
        report(where, std::string("field '") + field + "': no actor named '" + ep.actor + "'");
      }
    }
    if (!seen_edges.emplace(from, to).second) report(where, "duplicate edge");
    ++i;
  }

  auto run = graph.getRun();
  if (run.getSteps() == 0) report("run", "field 'steps': must be at least 1");
  if (run.getDir().size() == 0) report("run", "field 'dir': must not be empty");
  return out;
}

}  // namespace milesrt::graph
