#include "runtime/graph/loader.hpp"

#include <capnp/dynamic.h>
#include <capnp/schema-parser.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/graph/enum_hints.hpp"
#include "runtime/graph/union_check.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::graph {
namespace fs = std::filesystem;

loaded_graph::loaded_graph(fs::path file, std::unique_ptr<capnp::MallocMessageBuilder> message)
    : file_(std::move(file)), message_(std::move(message)) {}

schema::Graph::Reader loaded_graph::reader() const {
  return message_->getRoot<schema::Graph>().asReader();
}

schema::Graph::Builder loaded_graph::builder() { return message_->getRoot<schema::Graph>(); }

std::unique_ptr<loaded_graph> loaded_graph::from_flat(fs::path file,
                                                      const std::vector<uint8_t>& bytes) {
  if (bytes.size() % sizeof(capnp::word) != 0) {
    throw std::runtime_error("graph message of " + std::to_string(bytes.size()) +
                             " bytes is not a whole number of words");
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  auto message = std::make_unique<capnp::MallocMessageBuilder>();
  message->setRoot(reader.getRoot<schema::Graph>());
  return std::make_unique<loaded_graph>(std::move(file), std::move(message));
}

std::vector<fs::path> default_import_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("MILESRT_SCHEMA_PATH")) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ':');) {
      if (!item.empty()) dirs.emplace_back(item);
    }
  }
  dirs.emplace_back(MILESRT_SCHEMA_IMPORT_DIR);
  dirs.emplace_back(MILESRT_CAPNP_INCLUDE_DIR);
  return dirs;
}

namespace {

/// "" or, when brackets ('(', '[', '{') nest deeper than limits::max_nesting outside strings and
/// comments, where: checked before the Cap'n Proto compiler, which recurses once per level.
std::string nesting_problem(const std::string& text) {
  size_t depth = 0, line = 1;
  bool in_string = false, in_comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      in_comment = false;
    } else if (in_comment) {
    } else if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '#') {
      in_comment = true;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > limits::max_nesting) {
        return "line " + std::to_string(line) + ": brackets nested deeper than " +
               std::to_string(limits::max_nesting) + " levels";
      }
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A schema file on disk. Unlike capnp's own disk file, it reports errors with 1-based lines and
/// columns into a shared list instead of printing 0-based lines to stderr.
class disk_schema_file final : public capnp::SchemaFile {
 public:
  disk_schema_file(fs::path path, std::string display_name,
                   const std::vector<fs::path>& import_dirs, std::shared_ptr<problem_list> errors,
                   const std::vector<renamed_field>& renames)
      : path_(std::move(path)),
        display_name_(std::move(display_name)),
        import_dirs_(import_dirs),
        errors_(std::move(errors)),
        renames_(renames) {}

  kj::StringPtr getDisplayName() const override { return display_name_.c_str(); }

  kj::Array<const char> readContent() const override {
    std::ifstream in(path_, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto out = kj::heapArray<char>(text.size());
    std::copy(text.begin(), text.end(), out.begin());
    return out;
  }

  kj::Maybe<kj::Own<capnp::SchemaFile>> import(kj::StringPtr name) const override {
    std::string target(name.cStr());
    if (!target.empty() && target.front() == '/') {
      for (const auto& dir : import_dirs_) {
        fs::path candidate = dir / target.substr(1);
        if (fs::is_regular_file(candidate)) return open(candidate, target);
      }
      return nullptr;
    }
    fs::path candidate = path_.parent_path() / target;
    if (fs::is_regular_file(candidate)) {
      const std::string display = (fs::path(display_name_).parent_path() / target).string();
      if (auto p = nesting_problem(read_text(candidate)); !p.empty()) {
        errors_->push_back(file_problem(display, p));
        return nullptr;
      }
      return open(candidate, display);
    }
    return nullptr;
  }

  bool operator==(const capnp::SchemaFile& other) const override {
    auto* o = dynamic_cast<const disk_schema_file*>(&other);
    return o != nullptr && canonical() == o->canonical();
  }
  bool operator!=(const capnp::SchemaFile& other) const override { return !(*this == other); }
  size_t hashCode() const override { return std::hash<std::string>()(canonical()); }

  void reportError(SourcePos start, SourcePos /*end*/, kj::StringPtr message) const override {
    std::string text = message.cStr();
    // A wrong enum value: list the values the field takes (the compiler names neither).
    auto content = readContent();
    const std::string source(content.begin(), content.size());
    const size_t offset = offset_of(source, start.line, start.column);
    if (const auto* r = renamed(source, message.cStr(), offset)) {
      errors_->push_back(file_problem(display_name_, rename_message(*r, display_name_),
                                      static_cast<unsigned>(start.line + 1),
                                      static_cast<unsigned>(start.column + 1)));
      return;
    }
    text += enum_hint(capnp::Schema::from<schema::Graph>(), message.cStr(), source, offset);
    errors_->push_back(file_problem(display_name_, std::move(text),
                                    static_cast<unsigned>(start.line + 1),
                                    static_cast<unsigned>(start.column + 1)));
  }

 private:
  kj::Own<capnp::SchemaFile> open(const fs::path& path, std::string display) const {
    return kj::heap<disk_schema_file>(path, std::move(display), import_dirs_, errors_, renames_);
  }
  /// The rename table's entry when `message` is the compiler's "no field named X" about a field
  /// the table lists, written at `offset`.
  const renamed_field* renamed(const std::string& source, const std::string& message,
                               size_t offset) const {
    if (renames_.empty() || message.rfind("Struct has no field named '", 0) != 0) return nullptr;
    for (const auto& use : field_uses(source, capnp::Schema::from<schema::Graph>())) {
      if (use.offset == offset && !use.known) return find_rename(renames_, use.in, use.name);
    }
    return nullptr;
  }
  std::string canonical() const {
    std::error_code ec;
    auto c = fs::weakly_canonical(path_, ec);
    return ec ? path_.string() : c.string();
  }

  fs::path path_;
  std::string display_name_;
  std::vector<fs::path> import_dirs_;
  std::shared_ptr<problem_list> errors_;
  const std::vector<renamed_field>& renames_;
};

problem file_error(const fs::path& file, const std::string& message) {
  return file_problem(file.string(), message);
}

}  // namespace

const renamed_field* find_rename(const std::vector<renamed_field>& table, const std::string& in,
                                 const std::string& name) {
  for (const auto& r : table) {
    if (r.in == in && r.from == name) return &r;
  }
  return nullptr;
}

std::string rename_message(const renamed_field& r, const std::string& file) {
  if (r.to.empty()) return "field " + r.from + " was removed: " + r.hint;
  if (file.empty()) return "field " + r.from + " was renamed " + r.to;
  return "field " + r.from + " was renamed " + r.to + " (`milesrt upgrade " + file +
         "` rewrites the file)";
}

load_result load_graph(const fs::path& file, const std::vector<fs::path>& import_dirs,
                       const std::vector<renamed_field>& renames) {
  load_result result;
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    result.errors.push_back(file_error(file, "no such graph file"));
    return result;
  }
  if (!fs::is_regular_file(file, ec)) {
    result.errors.push_back(file_error(file, "not a regular file"));
    return result;
  }

  if (auto p = nesting_problem(read_text(file)); !p.empty()) {
    result.errors.push_back(file_error(file, p));
    return result;
  }
  auto errors = std::make_shared<problem_list>();
  capnp::SchemaParser parser;
  try {
    parser.loadCompiledTypeAndDependencies<schema::Graph>();
    auto parsed = parser.parseFile(
        kj::heap<disk_schema_file>(file, file.string(), import_dirs, errors, renames));
    if (!errors->empty()) {
      result.errors = *errors;
      return result;
    }
    KJ_IF_MAYBE (node, parsed.findNested("graph")) {
      auto proto = node->getProto();
      if (!proto.isConst()) {
        result.errors.push_back(file_error(file, "`graph` must be a constant: const graph :Graph"));
        return result;
      }
      auto constant = node->asConst();
      auto type = constant.getType();
      if (!type.isStruct() ||
          type.asStruct().getProto().getId() != capnp::typeId<schema::Graph>()) {
        result.errors.push_back(file_error(file,
                                           "constant `graph` must have type Graph "
                                           "(import \"/milesrt/graph.capnp\")"));
        return result;
      }
      // The compiler lets the last of two union members win without a word: refused here.
      auto conflicts =
          union_conflicts(read_text(file), file.string(), capnp::Schema::from<schema::Graph>());
      if (!conflicts.empty()) {
        for (auto& c : conflicts) result.errors.push_back(std::move(c));
        return result;
      }
      auto message = std::make_unique<capnp::MallocMessageBuilder>();
      message->setRoot(
          constant.as<capnp::DynamicValue>().as<capnp::DynamicStruct>().as<schema::Graph>());
      result.graph = std::make_unique<loaded_graph>(file, std::move(message));
    } else {
      result.errors.push_back(
          file_error(file, "declares no `const graph :Graph = (...)`; milesrt runs that constant"));
    }
  } catch (const kj::Exception& e) {
    // Errors already reported through the file carry positions; keep those, they are better.
    if (errors->empty()) {
      result.errors.push_back(file_error(file, e.getDescription().cStr()));
    } else {
      result.errors = *errors;
    }
  }
  return result;
}

}  // namespace milesrt::graph
