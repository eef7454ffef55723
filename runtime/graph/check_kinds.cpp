#include "runtime/graph/check_kinds.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>

#include "runtime/graph/check_shape.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::graph {
using runtime::kind_descriptor;
using runtime::param_spec;
using runtime::param_type;
using runtime::param_value;
using runtime::port_spec;
using shape::find_port;
using shape::kinds_by_actor;
using shape::reporter;
using shape::union_member;

namespace {

param_type type_of(schema::Param::Value::Reader v) {
  switch (v.which()) {
    case schema::Param::Value::BOOL:
      return param_type::boolean;
    case schema::Param::Value::INT:
      return param_type::integer;
    case schema::Param::Value::FLOAT:
      return param_type::real;
    case schema::Param::Value::TEXT:
      return param_type::text;
  }
  return param_type::text;
}

param_value value_of(schema::Param::Value::Reader v) {
  switch (v.which()) {
    case schema::Param::Value::BOOL:
      return v.getBool();
    case schema::Param::Value::INT:
      return v.getInt();
    case schema::Param::Value::FLOAT:
      return v.getFloat();
    case schema::Param::Value::TEXT:
      return std::string(v.getText());
  }
  return std::string();
}

}  // namespace

bool is_service_edge(const kind_descriptor& kind, const std::string& from_port) {
  return find_port(kind.uses, from_port) != nullptr;
}

std::string params_member_problem(const kind_descriptor& kind) {
  if (kind.params_member.empty()) return "";
  auto params =
      capnp::Schema::from<schema::ActorSpec>().getFieldByName("params").getType().asStruct();
  if (params.findFieldByName(kind.params_member) != nullptr) return "";
  std::string members;
  for (auto f : params.getFields())
    members += (members.empty() ? "" : ", ") + std::string(f.getProto().getName().cStr());
  return "kind '" + kind.name + "' takes params (" + kind.params_member + " = (...)), but the " +
         "schema of kinds (/milesrt/kinds.capnp) has no such member (members: " + members + ")";
}

capnp::DynamicStruct::Reader params_struct(schema::ActorSpec::Reader actor,
                                           const std::string& member,
                                           std::shared_ptr<capnp::MallocMessageBuilder>& storage) {
  capnp::DynamicStruct::Reader params = capnp::toDynamic(actor.getParams());
  auto field = params.getSchema().getFieldByName(member);
  if (params.has(field)) return params.get(field).as<capnp::DynamicStruct>();
  storage = std::make_shared<capnp::MallocMessageBuilder>();
  return storage->initRoot<capnp::DynamicStruct>(field.getType().asStruct()).asReader();
}

bool parse_param(const std::string& text, param_type t, param_value& out) {
  try {
    size_t used = 0;
    switch (t) {
      case param_type::boolean:
        if (text == "true")
          out = true;
        else if (text == "false")
          out = false;
        else
          return false;
        return true;
      case param_type::integer: {
        int64_t v = std::stoll(text, &used);
        if (used != text.size()) return false;
        out = v;
        return true;
      }
      case param_type::real: {
        double v = std::stod(text, &used);
        if (used != text.size()) return false;
        out = v;
        return true;
      }
      case param_type::text:
        out = text;
        return true;
    }
  } catch (const std::exception&) {
  }
  return false;
}

namespace {

/// Params given as `custom = [...]` against the kind's declared list: names, types, ranges,
/// required ones.
void check_custom_params(schema::ActorSpec::Reader actor, const kind_descriptor& kind,
                         const std::string& where, const reporter& report) {
  std::set<std::string> given;
  if (actor.getParams().isCustom()) {
    for (auto p : actor.getParams().getCustom()) {
      std::string pname = p.getName();
      const param_spec* spec = nullptr;
      for (const auto& s : kind.params)
        if (s.name == pname) spec = &s;
      if (spec == nullptr) {
        std::string declared;
        for (const auto& s : kind.params) declared += (declared.empty() ? "" : ", ") + s.name;
        report(where, "param '" + pname + "': kind '" + kind.name + "' has no such parameter" +
                          " (declared: " + (declared.empty() ? "none" : declared) + ")");
        continue;
      }
      if (!given.insert(pname).second) report(where, "param '" + pname + "': set twice");
      param_type t = type_of(p.getValue());
      if (t != spec->type) {
        report(where, "param '" + pname + "': expected " + to_string(spec->type) + ", got " +
                          to_string(t));
        continue;
      }
      double number = t == param_type::integer ? double(p.getValue().getInt())
                      : t == param_type::real  ? p.getValue().getFloat()
                                               : 0.0;
      if ((t == param_type::integer || t == param_type::real) &&
          ((spec->min && number < *spec->min) || (spec->max && number > *spec->max) ||
           std::isnan(number))) {
        report(where, "param '" + pname + "': value " + std::to_string(number) + " out of range [" +
                          (spec->min ? std::to_string(*spec->min) : "-inf") + ", " +
                          (spec->max ? std::to_string(*spec->max) : "inf") + "]");
      }
    }
  }
  for (const auto& s : kind.params) {
    if (s.required && given.count(s.name) == 0) {
      report(where, "param '" + s.name + "': required by kind '" + kind.name + "' (" +
                        to_string(s.type) + (s.help.empty() ? "" : ", " + s.help) + ")");
    }
  }
}

/// Parameters: a params struct for built-in kinds that have one, a declared list otherwise.
void check_params(schema::ActorSpec::Reader actor, const kind_descriptor& kind,
                  const std::string& where, const reporter& report) {
  std::string member = union_member(actor);
  if (!kind.params_member.empty()) {
    if (auto problem = params_member_problem(kind); !problem.empty()) {
      report(where, "field 'params': " + problem);
    } else if (member != "none" && member != kind.params_member) {
      report(where, "field 'params': kind '" + kind.name + "' takes params (" + kind.params_member +
                        " = (...)), not " + member);
    } else if (kind.check_params) {
      std::shared_ptr<capnp::MallocMessageBuilder> storage;
      for (const auto& problem :
           kind.check_params(params_struct(actor, kind.params_member, storage))) {
        report(where, within("params." + kind.params_member, problem));
      }
    }
    return;
  }
  if (member != "none" && member != "custom") {
    report(where,
           "field 'params': kind '" + kind.name + "' takes params (custom = [...]), not " + member);
    return;
  }
  check_custom_params(actor, kind, where, report);
}

/// Each actor: a known kind, its own fields, its params. Returns the kinds found.
kinds_by_actor check_actors(schema::Graph::Reader graph, const runtime::kind_registry& kinds,
                            const reporter& report) {
  kinds_by_actor kind_of;
  std::string known;
  for (const auto& n : kinds.names()) known += (known.empty() ? "" : ", ") + n;
  for (auto actor : graph.getActors()) {
    std::string name = actor.getName();
    std::string where = "actor '" + name + "'";
    const kind_descriptor* kind = kinds.find(actor.getKind());
    if (kind == nullptr) {
      report(where, "field 'kind': unknown actor kind '" + std::string(actor.getKind()) +
                        "' (known: " + (known.empty() ? "none" : known) + ")");
      continue;
    }
    kind_of[name] = kind;
    if (actor.getDeadlineSeconds() < 0 || std::isnan(actor.getDeadlineSeconds())) {
      report(where, "field 'deadlineSeconds': must be >= 0");
    }
    if (kind->role == runtime::role::buffer && kind->restartable) {
      report(where, "field 'kind': kind '" + kind->name +
                        "' is a buffer declared restartable: a restarted buffer " +
                        "would lose the items it held (a buffer kind must not be restartable)");
    }
    if (kind->role != runtime::role::stage && actor.getReplicas() != 1) {
      report(where, "field 'replicas': a " + std::string(runtime::to_string(kind->role)) +
                        " runs as exactly one replica");
    }
    check_params(actor, *kind, where, report);
  }
  return kind_of;
}

}  // namespace

problem_list validate_kinds(const loaded_graph& g, const runtime::kind_registry& kinds) {
  problem_list out;
  const reporter report{g.file().string(), out};
  auto graph = g.reader();
  const kinds_by_actor kind_of = check_actors(graph, kinds, report);
  using namespace shape;
  auto downstream = check_edges(graph, kind_of, report);
  // The graph's shape, once every actor's kind is known.
  if (kind_of.size() != graph.getActors().size()) return out;
  const roles r = roles_of(graph, kind_of);
  check_roles(graph, r, report);
  if (!r.learners.empty() && r.buffers.size() == 1)
    check_buffer_edges(graph, kind_of, r.learners[0], r.buffers[0], report);
  if (!r.learners.empty())
    check_feed_capacity(graph, kind_of, r.buffers.size() == 1 ? r.buffers[0] : r.learners[0],
                        report);
  if (!r.sources.empty()) check_reachable(graph, r.sources, downstream, report);
  check_in_graph(graph, kind_of, report);
  check_settings_agree(graph, kind_of, report);
  return out;
}

std::map<std::string, param_value> resolve_params(schema::ActorSpec::Reader actor,
                                                  const kind_descriptor& kind) {
  std::map<std::string, param_value> out;
  for (const auto& s : kind.params)
    if (s.fallback) out[s.name] = *s.fallback;
  if (actor.getParams().isCustom()) {
    for (auto p : actor.getParams().getCustom()) out[p.getName()] = value_of(p.getValue());
  }
  return out;
}

}  // namespace milesrt::graph
