#include "runtime/graph/overrides.hpp"

#include <capnp/dynamic.h>
#include <capnp/schema.h>

#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/enum_hints.hpp"

namespace milesrt::graph {
namespace {

std::string field_names(capnp::StructSchema schema) {
  std::string s;
  for (auto f : schema.getFields())
    s += (s.empty() ? "" : ", ") + std::string(f.getProto().getName());
  return s;
}

/// Sets a list of texts or enumerants from comma-separated items ("" = the empty list).
std::string set_list(capnp::DynamicStruct::Builder target, capnp::StructSchema::Field field,
                     const std::string& text) {
  std::vector<std::string> items;
  for (size_t start = 0; !text.empty() && start <= text.size();) {
    auto comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  auto element = field.getType().asList().getElementType();
  if (!element.isText() && !element.isEnum()) {
    return "field '" + std::string(field.getProto().getName()) +
           "' cannot be set from the command line";
  }
  if (element.isEnum()) {
    for (const auto& item : items) {
      if (element.asEnum().findEnumerantByName(item) == nullptr) {
        return "'" + item + "' is not one of " + enumerant_list(element.asEnum());
      }
    }
  }
  auto list = target.init(field, static_cast<unsigned>(items.size())).as<capnp::DynamicList>();
  for (unsigned i = 0; i < items.size(); ++i) {
    if (element.isText()) {
      list.set(i, capnp::Text::Reader(items[i].c_str()));
    } else {
      KJ_IF_MAYBE (e, element.asEnum().findEnumerantByName(items[i])) {
        list.set(i, capnp::DynamicEnum(*e));
      }
    }
  }
  return "";
}

/// Sets a scalar, text or enum field of `target` from its text form; an error message or "".
std::string set_field(capnp::DynamicStruct::Builder target, const std::string& name,
                      const std::string& text) {
  // A field of a struct field: `section.field` (the struct is set up when the graph has none).
  if (auto dot = name.find('.'); dot != std::string::npos) {
    const std::string head = name.substr(0, dot);
    KJ_IF_MAYBE (field, target.getSchema().findFieldByName(head)) {
      if (field->getType().which() != capnp::schema::Type::STRUCT)
        return "field '" + head + "' is not a struct ('" + name + "')";
      auto inner = target.has(*field) ? target.get(*field).as<capnp::DynamicStruct>()
                                      : target.init(*field).as<capnp::DynamicStruct>();
      return set_field(inner, name.substr(dot + 1), text);
    }
    return "no field '" + head + "' (fields: " + field_names(target.getSchema()) + ")";
  }
  KJ_IF_MAYBE (field, target.getSchema().findFieldByName(name)) {
    auto type = field->getType();
    runtime::param_value v;
    switch (type.which()) {
      case capnp::schema::Type::BOOL:
        if (!parse_param(text, runtime::param_type::boolean, v)) return "expected true or false";
        target.set(*field, std::get<bool>(v));
        return "";
      case capnp::schema::Type::INT8:
      case capnp::schema::Type::INT16:
      case capnp::schema::Type::INT32:
      case capnp::schema::Type::INT64:
        if (!parse_param(text, runtime::param_type::integer, v)) return "expected an integer";
        try {
          target.set(*field, std::get<int64_t>(v));
        } catch (const kj::Exception&) {
          return "value out of range";
        }
        return "";
      case capnp::schema::Type::UINT8:
      case capnp::schema::Type::UINT16:
      case capnp::schema::Type::UINT32:
      case capnp::schema::Type::UINT64:
        if (!parse_param(text, runtime::param_type::integer, v) || std::get<int64_t>(v) < 0) {
          return "expected a non-negative integer";
        }
        try {
          target.set(*field, static_cast<uint64_t>(std::get<int64_t>(v)));
        } catch (const kj::Exception&) {
          return "value out of range";
        }
        return "";
      case capnp::schema::Type::FLOAT32:
      case capnp::schema::Type::FLOAT64:
        if (!parse_param(text, runtime::param_type::real, v)) return "expected a number";
        target.set(*field, std::get<double>(v));
        return "";
      case capnp::schema::Type::TEXT:
        target.set(*field, capnp::Text::Reader(text.c_str()));
        return "";
      case capnp::schema::Type::ENUM: {
        KJ_IF_MAYBE (e, type.asEnum().findEnumerantByName(text)) {
          target.set(*field, capnp::DynamicEnum(*e));
          return "";
        }
        return "'" + text + "' is not one of " + enumerant_list(type.asEnum());
      }
      case capnp::schema::Type::LIST:
        return set_list(target, *field, text);
      default:
        return "field '" + name + "' cannot be set from the command line";
    }
  }
  return "no field '" + name + "' (fields: " + field_names(target.getSchema()) + ")";
}

/// A custom parameter's value as the graph holds it.
runtime::param_value custom_value(schema::Param::Reader p) {
  switch (p.getValue().which()) {
    case schema::Param::Value::BOOL:
      return p.getValue().getBool();
    case schema::Param::Value::INT:
      return p.getValue().getInt();
    case schema::Param::Value::FLOAT:
      return p.getValue().getFloat();
    case schema::Param::Value::TEXT:
      return std::string(p.getValue().getText().cStr());
  }
  return std::string();
}

/// The fields a graph may no longer name, for the messages below.
using rename_table = std::vector<renamed_field>;

/// `err` from setting `field` of `target`, or, when the field is one `renames` lists, its rename.
std::string or_renamed(std::string err, capnp::DynamicStruct::Builder target,
                       const std::string& field, const rename_table& renames) {
  if (err.rfind("no field '", 0) != 0) return err;
  const std::string in = target.getSchema().getShortDisplayName().cStr();
  if (const renamed_field* r = find_rename(renames, in, field)) return rename_message(*r, "");
  return err;
}

/// Sets `field` of the actor's params struct (the kind's union member, made when the graph left
/// params at another member); "" or the problem.
std::string set_struct_param(schema::ActorSpec::Builder actor, const runtime::kind_descriptor& kind,
                             const std::string& field, const std::string& value,
                             const rename_table& renames) {
  capnp::DynamicStruct::Builder params = capnp::toDynamic(actor.getParams());
  auto problem = params_member_problem(kind);
  if (!problem.empty()) return problem;
  auto member = params.getSchema().getFieldByName(kind.params_member);
  bool present = false;
  KJ_IF_MAYBE (which, params.which()) {
    present = *which == member;
  }
  auto target = present ? params.get(member).as<capnp::DynamicStruct>()
                        : params.init(member).as<capnp::DynamicStruct>();
  return or_renamed(set_field(target, field, value), target, field, renames);
}

/// Sets the declared parameter `field` in the actor's custom list (replaced or appended); "" or
/// the problem.
std::string set_custom_param(schema::ActorSpec::Builder actor, const runtime::kind_descriptor& kind,
                             const std::string& field, const std::string& value) {
  const runtime::param_spec* spec = nullptr;
  for (const auto& s : kind.params)
    if (s.name == field) spec = &s;
  if (spec == nullptr) return "kind '" + kind.name + "' has no parameter '" + field + "'";
  runtime::param_value v;
  if (!parse_param(value, spec->type, v))
    return std::string("expected ") + to_string(spec->type) + " for '" + field + "'";
  std::vector<std::pair<std::string, runtime::param_value>> items;
  if (actor.getParams().isCustom()) {
    for (auto p : actor.getParams().getCustom())
      if (std::string(p.getName().cStr()) != field)
        items.emplace_back(p.getName().cStr(), custom_value(p.asReader()));
  }
  items.emplace_back(field, v);
  auto list = actor.getParams().initCustom(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    list[i].setName(items[i].first);
    auto val = list[i].getValue();
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>)
            val.setBool(x);
          else if constexpr (std::is_same_v<T, int64_t>)
            val.setInt(x);
          else if constexpr (std::is_same_v<T, double>)
            val.setFloat(x);
          else
            val.setText(x);
        },
        items[i].second);
  }
  return "";
}

/// Sets `field` of actor `actor`: a field of its spec, of its params struct, or a declared
/// parameter; "" or the problem.
std::string set_actor_field(schema::ActorSpec::Builder actor, const runtime::kind_registry& kinds,
                            const std::string& field, const std::string& value,
                            const rename_table& renames) {
  if (field == "replicas" || field == "placement" || field == "deadlineSeconds")
    return set_field(capnp::toDynamic(actor), field, value);
  const runtime::kind_descriptor* kind = kinds.find(actor.getKind().cStr());
  if (kind == nullptr) {
    std::string known;
    for (const auto& n : kinds.names()) known += (known.empty() ? "" : ", ") + n;
    return "actor '" + std::string(actor.getName().cStr()) + "' has unknown kind '" +
           std::string(actor.getKind().cStr()) + "' (known: " + (known.empty() ? "none" : known) +
           ")";
  }
  if (!kind->params_member.empty()) return set_struct_param(actor, *kind, field, value, renames);
  return set_custom_param(actor, *kind, field, value);
}

}  // namespace

std::optional<problem> apply_override(loaded_graph& g, const runtime::kind_registry& kinds,
                                      const std::string& assignment,
                                      const std::vector<renamed_field>& renames) {
  auto fail = [&](const std::string& why) { return place_problem("", "--set " + assignment, why); };
  auto eq = assignment.find('=');
  auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    return fail("expected actor.param=value or run.field=value");
  }
  std::string head = assignment.substr(0, dot);
  std::string field = assignment.substr(dot + 1, eq - dot - 1);
  std::string value = assignment.substr(eq + 1);
  auto graph = g.builder();
  std::string err;
  if (head == "run") {
    auto run = capnp::toDynamic(graph.getRun());
    err = or_renamed(set_field(run, field, value), run, field, renames);
    return err.empty() ? std::nullopt : std::optional<problem>(fail(err));
  }
  for (auto actor : graph.getActors()) {
    if (std::string(actor.getName().cStr()) != head) continue;
    err = set_actor_field(actor, kinds, field, value, renames);
    return err.empty() ? std::nullopt : std::optional<problem>(fail(err));
  }
  return fail("no actor named '" + head + "'");
}

}  // namespace milesrt::graph
