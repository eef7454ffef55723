#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "runtime/cli/command.hpp"
#include "runtime/cli/shared_secret.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/messages.hpp"
#include "runtime/core/plugins.hpp"
#include "runtime/worker/workers.hpp"

namespace milesrt::cli {

command make_worker_command() {
  return {"worker", "Join a run as a worker process and host the actors placed on it",
          [](CLI::App& app, context& ctx) -> runner {
            struct options {
              std::string connect;
              std::string name = "worker";
              std::string secret_file;
              std::vector<std::string> plugins;
              double wait = 60;
            };
            auto opt = std::make_shared<options>();
            app.add_option("--connect", opt->connect, "HOST:PORT the run listens on")->required();
            app.add_option("--name", opt->name, "The name placements use for this worker");
            app.add_option("--secret-file", opt->secret_file,
                           "File whose first line is the run's shared secret (default: "
                           "$MILESRT_SECRET)");
            app.add_option("--plugin", opt->plugins, "Shared library with custom actor kinds");
            app.add_option("--wait", opt->wait, "Seconds to keep trying to reach the run");
            return [opt, &ctx] {
              auto colon = opt->connect.rfind(':');
              uint16_t port = 0;
              try {
                port = static_cast<uint16_t>(std::stoul(opt->connect.substr(colon + 1)));
              } catch (const std::exception&) {
                colon = std::string::npos;
              }
              if (colon == std::string::npos || port == 0) {
                print_error(ctx.err, "worker",
                            "--connect " + opt->connect + ": expected HOST:PORT");
                return exit_status::bad_input;
              }
              std::string secret;
              try {
                secret = load_secret(opt->secret_file);
              } catch (const std::invalid_argument& e) {
                print_error(ctx.err, "worker", e.what());
                return exit_status::bad_input;
              }
              caf::actor_system_config config;
              config.add_message_types<caf::id_block::milesrt_runtime>();
              runtime::kind_registry kinds;
              if (ctx.kinds != nullptr) kinds = *ctx.kinds;
              for (const auto& p : opt->plugins) {
                auto errors = runtime::load_plugin_file(p, {&kinds, &config});
                if (!errors.empty()) {
                  print_error(ctx.err, "worker", errors);
                  return exit_status::bad_input;
                }
              }
              kinds.register_types(config);
              runtime::add_error_category(config);
              config.load<caf::io::middleman>();
              caf::actor_system sys{config};
              auto outcome = runtime::serve_as_worker(
                  sys, kinds, opt->connect.substr(0, colon), port, opt->name, secret,
                  std::chrono::milliseconds(static_cast<int64_t>(opt->wait * 1000)));
              if (!outcome.error.empty()) print_error(ctx.err, "worker", outcome.error);
              // The run is over and this process's actors were told to exit. Destroying the actor
              // system would wait for every detached actor's thread, and one still referenced from
              // a proxy of the run's (now gone) node never ends: leave without that wait.
              ctx.out.flush();
              ctx.err.flush();
              std::fflush(nullptr);
              std::_Exit(static_cast<int>(outcome.error.empty() ? exit_status::ok
                                          : outcome.refused     ? exit_status::bad_input
                                                                : exit_status::run_failed));
            };
          }};
}

}  // namespace milesrt::cli
