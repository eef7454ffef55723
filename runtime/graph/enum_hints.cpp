#include "runtime/graph/enum_hints.hpp"

#include <cctype>
#include <map>
#include <set>

namespace milesrt::graph {
namespace {

struct enum_index {
  std::map<std::string, std::map<uint64_t, capnp::EnumSchema>> by_field;  ///< field name -> enums
  std::map<std::string, std::map<uint64_t, capnp::EnumSchema>> by_name;   ///< enum's own name
};

void collect(capnp::StructSchema s, std::set<uint64_t>& seen, enum_index& out) {
  if (!seen.insert(s.getProto().getId()).second) return;
  for (auto field : s.getFields()) {
    auto type = field.getType();
    while (type.isList()) type = type.asList().getElementType();
    if (type.isStruct()) {
      collect(type.asStruct(), seen, out);
    } else if (type.isEnum()) {
      auto e = type.asEnum();
      const uint64_t id = e.getProto().getId();
      out.by_field[field.getProto().getName().cStr()].emplace(id, e);
      out.by_name[e.getShortDisplayName().cStr()].emplace(id, e);
    }
  }
}

/// The enum under `key`, if there is one, or several with the same values (one choice named alike
/// in two structs, as the schedule's and a buffer's onStale).
const capnp::EnumSchema* only(const std::map<std::string, std::map<uint64_t, capnp::EnumSchema>>& m,
                              const std::string& key) {
  auto it = m.find(key);
  if (it == m.end() || it->second.empty()) return nullptr;
  const auto* first = &it->second.begin()->second;
  for (const auto& [id, e] : it->second)
    if (enumerant_list(e) != enumerant_list(*first)) return nullptr;
  return first;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The identifier before the `=` that precedes `offset` (skipping blanks), or "".
std::string field_before(const std::string& source, size_t offset) {
  size_t i = std::min(offset, source.size());
  while (i > 0 && std::isspace(static_cast<unsigned char>(source[i - 1]))) --i;
  if (i == 0 || source[i - 1] != '=') return "";
  --i;
  while (i > 0 && std::isspace(static_cast<unsigned char>(source[i - 1]))) --i;
  size_t end = i;
  while (i > 0 && is_word(source[i - 1])) --i;
  return source.substr(i, end - i);
}

}  // namespace

std::string enumerant_list(capnp::EnumSchema e) {
  std::string s;
  for (auto x : e.getEnumerants())
    s += (s.empty() ? "" : ", ") + std::string(x.getProto().getName().cStr());
  return s;
}

size_t offset_of(const std::string& source, uint32_t line, uint32_t column) {
  size_t at = 0;
  for (uint32_t l = 0; l < line; ++l) {
    at = source.find('\n', at);
    if (at == std::string::npos) return source.size();
    ++at;
  }
  return std::min(source.size(), at + column);
}

std::string enum_hint(capnp::StructSchema root, const std::string& message,
                      const std::string& source, size_t offset) {
  const std::string mismatch = "Type mismatch; expected ", undefined = "Not defined: ";
  const bool is_mismatch = starts_with(message, mismatch),
             is_undefined = starts_with(message, undefined);
  if (!is_mismatch && !is_undefined) return "";
  enum_index index;
  std::set<uint64_t> seen;
  collect(root, seen, index);
  if (is_mismatch) {
    std::string name = message.substr(mismatch.size());
    while (!name.empty() && name.back() == '.') name.pop_back();
    if (const auto* e = only(index.by_name, name)) {
      return " " + name + " is one of: " + enumerant_list(*e) + " (written without quotes)";
    }
    return "";
  }
  const std::string field = field_before(source, offset);
  if (const auto* e = only(index.by_field, field)) {
    return " (" + field + " is one of: " + enumerant_list(*e) + ")";
  }
  return "";
}

}  // namespace milesrt::graph
