#include "runtime/graph/dot.hpp"

#include <sstream>

#include "runtime/graph/validate.hpp"

namespace milesrt::graph {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string schedule_text(schema::Schedule::Reader s) {
  if (s.isAsync()) {
    auto a = s.getAsync();
    return "async, maxStaleness " + std::to_string(a.getMaxStaleness()) + ", onStale " +
           (a.getOnStale() == schema::Schedule::OnStale::DROP ? "drop" : "wait");
  }
  return "sync";
}

}  // namespace

std::string to_dot(const loaded_graph& g) {
  auto graph = g.reader();
  std::ostringstream out;
  std::string name = graph.getName();
  out << "digraph " << quoted(name.empty() ? g.file().stem().string() : name) << " {\n";
  out << "  label="
      << quoted((name.empty() ? g.file().stem().string() : name) + " (" +
                schedule_text(graph.getSchedule()) + ")")
      << ";\n  labelloc=t;\n  node [shape=box, style=rounded];\n";
  for (auto actor : graph.getActors()) {
    std::string label = std::string(actor.getName()) + "\\n" + std::string(actor.getKind());
    if (actor.getReplicas() > 1) label += " x" + std::to_string(actor.getReplicas());
    if (actor.getPlacement().size() > 0) label += "\\n@" + std::string(actor.getPlacement());
    out << "  " << quoted(actor.getName()) << " [label=\"" << label << "\"];\n";
  }
  for (auto edge : graph.getEdges()) {
    endpoint from, to;
    if (!parse_endpoint(edge.getFrom(), from) || !parse_endpoint(edge.getTo(), to)) continue;
    out << "  " << quoted(from.actor) << " -> " << quoted(to.actor)
        << " [label=" << quoted(from.port + " -> " + to.port) << "];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace milesrt::graph
