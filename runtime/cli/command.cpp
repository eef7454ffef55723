#include "runtime/cli/command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "runtime/core/log.hpp"

namespace milesrt::cli {

void print_error(std::ostream& err, std::string_view cmd, std::string_view what) {
  std::string line;
  line.reserve(what.size());
  for (size_t i = 0; i < what.size(); ++i) {
    if (what[i] == '\n') {
      if (i + 1 < what.size()) line += "; ";
    } else {
      line += what[i];
    }
  }
  err << "milesrt";
  if (!cmd.empty()) err << ' ' << cmd;
  err << ": error: " << line << std::endl;
}

int run_main(int argc, char** argv, const std::vector<command>& commands, context& ctx,
             const std::function<std::string()>& version) {
  CLI::App app{ctx.description, "milesrt"};
  app.set_version_flag("--version", version);
  app.require_subcommand(1);
  app.fallthrough(false);

  std::map<const CLI::App*, std::pair<std::string, runner>> runners;
  std::string log_level = "info", log_format = "text";
  for (const auto& cmd : commands) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
    runners[sub] = {cmd.name, cmd.define(*sub, ctx)};
    sub->add_option("--log-level", log_level,
                    "Log lines at this level and above: trace, debug, info, warn, error, off")
        ->capture_default_str()
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
    sub->add_option("--log-format", log_format, "Log lines as text or as one JSON object each")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "json"}));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e, ctx.out, ctx.err);  // --help, --version
    }
    std::string cmd;
    for (const CLI::App* sub : app.get_subcommands()) cmd = sub->get_name();
    if (cmd.empty() && argc < 2) {
      print_error(ctx.err, "", "no subcommand given; see milesrt --help");
    } else {
      print_error(ctx.err, cmd, e.what());
    }
    return static_cast<int>(exit_status::bad_input);
  }

  for (const CLI::App* sub : app.get_subcommands()) {
    auto it = runners.find(sub);
    if (it == runners.end()) continue;
    try {
      log::configure(log_level, log_format);
      return static_cast<int>(it->second.second());
    } catch (const std::exception& e) {
      print_error(ctx.err, it->second.first, e.what());
      return static_cast<int>(exit_status::run_failed);
    }
  }
  print_error(ctx.err, "", "no subcommand given; see milesrt --help");
  return static_cast<int>(exit_status::bad_input);
}

}  // namespace milesrt::cli
