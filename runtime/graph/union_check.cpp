#include "runtime/graph/union_check.hpp"

#include <capnp/schema.capnp.h>

#include <cctype>

namespace milesrt::graph {
namespace {

/// A cursor over Cap'n Proto text that skips blanks and comments and knows its line and column.
class cursor {
 public:
  explicit cursor(const std::string& text, size_t at) : text_(text), at_(at) {
    for (size_t i = 0; i < at && i < text.size(); ++i) advance_position(text[i]);
  }
  bool done() { return skip(), at_ >= text_.size(); }
  char peek() { return skip(), at_ < text_.size() ? text_[at_] : '\0'; }
  void take() {
    if (at_ < text_.size()) advance_position(text_[at_++]);
  }
  /// An identifier (letters, digits, '_'), or "" when none starts here.
  std::string identifier() {
    skip();
    std::string id;
    while (at_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) {
      id += text_[at_];
      take();
    }
    return id;
  }
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  size_t offset() const { return at_; }

  /// Skips one value it does not follow: a string, or anything up to ',' ')' ']' at its depth.
  void skip_value() {
    int depth = 0;
    while (!done()) {
      const char c = peek();
      if (c == '"') {
        skip_string();
        continue;
      }
      if (depth == 0 && (c == ',' || c == ')' || c == ']')) return;
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      take();
    }
  }
  void skip_string() {
    take();  // the opening quote
    while (at_ < text_.size() && text_[at_] != '"') {
      if (text_[at_] == '\\') take();
      take();
    }
    take();
  }

 private:
  void skip() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '#') {
        while (at_ < text_.size() && text_[at_] != '\n') take();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        take();
      } else {
        return;
      }
    }
  }
  void advance_position(char c) {
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
  }

  const std::string& text_;
  size_t at_;
  size_t line_ = 1, column_ = 1;
};

/// The struct's name within its schema file: "TrainerParams", "Schedule.Async".
std::string struct_name(capnp::StructSchema s) {
  const std::string name = s.getProto().getDisplayName().cStr();
  const size_t colon = name.find(':');
  return colon == std::string::npos ? name : name.substr(colon + 1);
}

struct checker {
  const std::string& name;
  problem_list out;
  std::vector<field_use> uses;

  void value(cursor& c, const capnp::Type& type, const std::string& path) {
    if (type.isStruct() && c.peek() == '(') return literal(c, type.asStruct(), path);
    if (type.isList() && c.peek() == '[') {
      c.take();
      const auto element = type.asList().getElementType();
      for (size_t i = 0; !c.done() && c.peek() != ']'; ++i) {
        value(c, element, path + "[" + std::to_string(i) + "]");
        if (c.peek() == ',') c.take();
      }
      c.take();
      return;
    }
    c.skip_value();
  }

  /// `(field = value, ...)` of `schema`: each field followed into, the union members it sets
  /// compared (each struct or group has at most one unnamed union; named unions are groups).
  void literal(cursor& c, capnp::StructSchema schema, const std::string& path) {
    c.take();            // '('
    std::string member;  // the union member set so far in this literal
    while (!c.done() && c.peek() != ')') {
      const auto line = static_cast<unsigned>(c.line());
      const auto column = static_cast<unsigned>(c.column());
      const size_t offset = c.offset();
      const std::string field = c.identifier();
      if (field.empty() || c.peek() != '=') {  // not `name = value`: nothing to follow here
        c.skip_value();
      } else {
        c.take();  // '='
        const std::string inner = path.empty() ? field : path + "." + field;
        auto found = schema.findFieldByName(field.c_str());
        uses.push_back({offset, field, struct_name(schema), found != nullptr});
        KJ_IF_MAYBE (f, found) {
          if (f->getProto().getDiscriminantValue() != capnp::schema::Field::NO_DISCRIMINANT) {
            if (!member.empty() && member != field) {
              problem p = file_problem(name,
                                       "'" + member + "' and '" + field +
                                           "' are members of one union (Cap'n Proto would keep "
                                           "only the last); set one of them",
                                       line, column);
              p.field = path.empty() ? "the graph" : path;
              out.push_back(std::move(p));
            }
            member = field;
          }
          value(c, f->getType(), inner);
        } else {
          c.skip_value();
        }
      }
      if (c.peek() == ',') c.take();
    }
    c.take();  // ')'
  }
};

/// Where the value of `const graph :Type =` starts in `text`, or npos.
size_t graph_value(const std::string& text) {
  // Blank comments and strings out of the search for the constant, keeping every offset.
  std::string plain = text;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (plain[i] == '#') {
      while (i < plain.size() && plain[i] != '\n') plain[i++] = ' ';
    } else if (plain[i] == '"') {
      for (++i; i < plain.size() && plain[i] != '"'; ++i) {
        if (plain[i] == '\\' && i + 1 < plain.size()) plain[i++] = ' ';
        plain[i] = ' ';
      }
    }
  }
  // `const graph :Type =`, the words apart by blanks only.
  size_t value = std::string::npos;
  for (size_t at = plain.find("const"); at != std::string::npos; at = plain.find("const", at + 1)) {
    cursor k(plain, at + 5);
    if (k.identifier() != "graph" || k.peek() != ':') continue;
    k.take();
    if (k.identifier().empty()) continue;
    while (k.peek() == '.') {  // a qualified type name
      k.take();
      k.identifier();
    }
    if (k.peek() != '=') continue;
    k.take();
    value = k.offset();
    break;
  }
  return value;
}

checker walk(const std::string& text, const std::string& name, capnp::StructSchema root) {
  checker k{name, {}, {}};
  const size_t value = graph_value(text);
  if (value == std::string::npos) return k;
  cursor c(text, value);
  if (c.peek() == '(') k.literal(c, root, "");
  return k;
}

}  // namespace

problem_list union_conflicts(const std::string& text, const std::string& name,
                             capnp::StructSchema root) {
  return walk(text, name, root).out;
}

std::vector<field_use> field_uses(const std::string& text, capnp::StructSchema root) {
  return walk(text, "", root).uses;
}

}  // namespace milesrt::graph
