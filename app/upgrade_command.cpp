// `milesrt upgrade FILE`: rewrites a graph file's renamed fields in place (schema_renames.cpp),
// keeping its comments and layout: only the old names change, token by token, in the struct the
// table names. The result is written beside the file and parsed before it replaces the file.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "app/commands.hpp"
#include "app/schema_renames.hpp"
#include "runtime/graph/union_check.hpp"

namespace milesrt::app {
namespace {
namespace fs = std::filesystem;

struct upgrade_options {
  std::string file;
};

/// "LINE:COL" (1-based) of `offset` in `text`.
std::string position(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

/// One old name to replace.
struct edit {
  size_t offset;
  const graph::renamed_field* rename;
};

bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

cli::exit_status upgrade(const upgrade_options& opt, cli::context& ctx) {
  const auto& renames = ctx.renames != nullptr ? *ctx.renames : schema_renames();
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(opt.file, ec);
  if (ec || !fs::is_regular_file(file)) {
    cli::print_error(ctx.err, "upgrade", opt.file + ": no such graph file");
    return cli::exit_status::bad_input;
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<edit> edits;
  bool removed = false;
  for (const auto& use : graph::field_uses(text, capnp::Schema::from<schema::Graph>())) {
    if (use.known) continue;
    const auto* r = graph::find_rename(renames, use.in, use.name);
    if (r == nullptr) continue;
    if (r->to.empty()) {
      cli::print_error(ctx.err, "upgrade",
                       opt.file + ":" + position(text, use.offset) + ": " +
                           graph::rename_message(*r, opt.file) + " (not rewritten: edit it)");
      removed = true;
    }
    edits.push_back({use.offset, r});
  }
  if (removed) return cli::exit_status::bad_input;
  std::string out = text;
  for (auto e = edits.rbegin(); e != edits.rend(); ++e)
    out.replace(e->offset, e->rename->from.size(), e->rename->to);
  // The upgraded text must load before it replaces the file (relative imports: the same folder).
  const fs::path temp =
      file.parent_path() / ("." + file.filename().string() + ".upgrade-" +
                            std::to_string(::getpid()) + file.extension().string());
  if (!write_text(temp, out)) {
    fs::remove(temp, ec);
    cli::print_error(ctx.err, "upgrade", temp.string() + ": cannot write");
    return cli::exit_status::bad_input;
  }
  std::vector<fs::path> dirs(ctx.schema_dirs.begin(), ctx.schema_dirs.end());
  auto loaded = graph::load_graph(temp, dirs, renames);
  if (!loaded.ok()) {
    fs::remove(temp, ec);
    cli::print_error(ctx.err, "upgrade",
                     opt.file + ": " + (edits.empty() ? "" : "the upgraded file ") +
                         "does not load; unchanged:");
    for (const auto& d : loaded.errors) cli::print_error(ctx.err, "upgrade", d.text());
    return cli::exit_status::bad_input;
  }
  if (edits.empty()) {
    fs::remove(temp, ec);
    ctx.out << opt.file << ": nothing to upgrade\n";
    return cli::exit_status::ok;
  }
  fs::permissions(temp, fs::status(file).permissions(), ec);
  fs::rename(temp, file, ec);
  if (ec) {
    fs::remove(temp, ec);
    cli::print_error(ctx.err, "upgrade", opt.file + ": cannot replace: " + ec.message());
    return cli::exit_status::bad_input;
  }
  for (const auto& e : edits) {
    ctx.out << opt.file << ":" << position(text, e.offset) << ": " << e.rename->from << " -> "
            << e.rename->to << " (" << e.rename->in << ")\n";
  }
  ctx.out << opt.file << ": upgraded (" << edits.size() << " field(s) renamed)\n";
  return cli::exit_status::ok;
}

}  // namespace

cli::command make_upgrade_command() {
  return {"upgrade",
          "Rewrite a graph file's renamed fields in place, keeping its comments and layout",
          [](CLI::App& app, cli::context& ctx) -> cli::runner {
            auto opt = std::make_shared<upgrade_options>();
            app.add_option("graph", opt->file, "Graph file (.capnp) declaring `const graph :Graph`")
                ->required();
            app.footer(
                "Prints each change (FILE:LINE:COL: old -> new). A removed field is named with "
                "what to write instead, and the file is left as it is; so is a file that would "
                "not load after the renames.");
            return [opt, &ctx] { return upgrade(*opt, ctx); };
          }};
}

}  // namespace milesrt::app
