#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"
#include "runtime/cli/shared_secret.hpp"
#include "runtime/cli/supervisor.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/messages.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/worker/workers.hpp"

namespace milesrt::cli {

namespace {

/// Destroys the actor system, which waits for every actor to be gone, with a watchdog: past a grace
/// period it says so and ends the process with the run's status. By then the run's results are
/// written; an actor whose last reference outlives the run (seen, rarely, after a run with a worker
/// process: a detached actor's thread waiting for its object to be destroyed) must not hold the
/// exit forever.
exit_status shut_down(std::unique_ptr<caf::actor_system> sys, exit_status status, context& ctx) {
  std::ostream* err = &ctx.err;
  std::thread([status, err] {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    *err << "milesrt run: warning: an actor was still referenced 20 s after the run ended; exiting "
            "without waiting for it (the run's results are complete)"
         << std::endl;
    std::fflush(nullptr);
    std::_Exit(static_cast<int>(status));
  }).detach();
  sys.reset();
  return status;
}

/// "HOST:PORT" or "PORT"; false when malformed.
bool parse_address(const std::string& text, std::string& host, uint16_t& port) {
  auto colon = text.rfind(':');
  std::string p = colon == std::string::npos ? text : text.substr(colon + 1);
  host = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
  try {
    size_t used = 0;
    unsigned long v = std::stoul(p, &used);
    if (used != p.size() || v > 65535) return false;
    port = static_cast<uint16_t>(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// What `milesrt run` was told.
struct run_options {
  std::string file;
  std::vector<std::string> sets;
  std::string resume;
  bool strict_resume = false;
  std::string run_dir;
  std::string listen;
  std::string secret_file;
  std::string secret;  ///< from secret_file or $MILESRT_SECRET
  bool quiet = false;
  int metrics_port = -1;
  bool supervise = false;
  int max_restarts = 3;
  bool max_restarts_given = false;
};

void add_run_options(CLI::App& app, run_options& opt) {
  app.add_option("graph", opt.file, "Graph file (.capnp) declaring `const graph :Graph`")
      ->required();
  app.add_option("--set", opt.sets, "Override: actor.param=value or run.field=value");
  app.add_option("--resume", opt.resume,
                 "Continue the run in RUN_DIR from its newest complete checkpoint");
  app.add_flag("--strict-resume", opt.strict_resume,
               "With --resume or --supervise: refuse to resume when a newer checkpoint is corrupt "
               "(its files do not match its manifest) instead of falling back to an older one");
  app.add_option("--run-dir", opt.run_dir, "Run directory (default: the graph's run.dir)");
  app.add_option("--listen", opt.listen,
                 "HOST:PORT where worker processes join (needed when placements name workers)");
  app.add_option("--secret-file", opt.secret_file,
                 "File whose first line is the secret workers must present to join (default: "
                 "$MILESRT_SECRET); required when --listen is not a loopback address");
  app.add_flag("--quiet", opt.quiet, "No progress line");
  app.add_option("--metrics-port", opt.metrics_port,
                 "Loopback port of the live page and GET /metrics (0: a free one); turns on "
                 "the prometheus and page sinks when the graph names neither")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--supervise", opt.supervise,
               "Run the graph in a child process and start it again from the newest "
               "complete checkpoint each time it dies");
  app.add_option("--max-restarts", opt.max_restarts,
                 "With --supervise: how many times a dead run process is replaced (default 3)")
      ->check(CLI::Range(0, 1000000));
}

/// `--supervise`: the run in a child process, started again from its newest checkpoint each time
/// it dies. What can be checked before any child starts is checked here.
exit_status run_supervised(const run_options& opt, const graph::loaded_graph& g, context& ctx) {
  runtime::run_request probe;
  probe.run_dir = !opt.resume.empty() ? opt.resume : opt.run_dir;
  const auto dir = runtime::resolve_run_dir(g, probe);
  if (auto problem = runtime::unwritable_dir(dir); !problem.empty()) {
    print_error(ctx.err, "run", problem);
    return exit_status::bad_input;
  }
  if (!opt.resume.empty()) {
    // The run process reads the checkpoints again (and says what it passes over).
    auto found = runtime::find_checkpoint(dir);
    if (opt.strict_resume && found.newer_corrupt) {
      print_error(ctx.err, "run", "cannot resume (--strict-resume): " + *found.newer_corrupt);
      return exit_status::bad_input;
    }
    if (!found.newest) {
      print_error(ctx.err, "run",
                  "cannot resume: no complete checkpoint under " + (dir / "checkpoints").string());
      return exit_status::bad_input;
    }
  }
  supervise_request sup;
  sup.args = {"run", opt.file};
  for (const auto& s : opt.sets) sup.args.insert(sup.args.end(), {"--set", s});
  if (!opt.listen.empty()) sup.args.insert(sup.args.end(), {"--listen", opt.listen});
  if (!opt.secret_file.empty()) sup.args.insert(sup.args.end(), {"--secret-file", opt.secret_file});
  if (opt.quiet) sup.args.push_back("--quiet");
  sup.args.insert(sup.args.end(),
                  {"--log-level", log::level_name(), "--log-format", log::format_name()});
  if (opt.strict_resume) sup.args.push_back("--strict-resume");
  if (opt.metrics_port >= 0)
    sup.args.insert(sup.args.end(), {"--metrics-port", std::to_string(opt.metrics_port)});
  sup.run_dir = dir;
  sup.resume_first = !opt.resume.empty();
  sup.max_restarts = opt.max_restarts;
  return supervise(sup, ctx.err);
}

/// The metric sinks the graph and --metrics-port ask for, announced on stdout; null (the error
/// printed) when one cannot start.
std::shared_ptr<runtime::metric_sinks> start_sinks(const run_options& opt,
                                                   const graph::loaded_graph& g,
                                                   const std::filesystem::path& run_dir,
                                                   context& ctx) {
  auto sink_opts = runtime::sinks_for(g, run_dir, opt.metrics_port);
  if (opt.metrics_port >= 0 && !sink_opts.prometheus && !sink_opts.page) {
    sink_opts.prometheus = sink_opts.page = true;
  }
  std::shared_ptr<runtime::metric_sinks> sinks;
  try {
    sinks = std::make_shared<runtime::metric_sinks>(sink_opts);
  } catch (const std::exception& e) {
    print_error(ctx.err, "run", e.what());
    return nullptr;
  }
  if (!sinks->url().empty()) {
    const std::string url = sinks->url();
    ctx.out << "milesrt run:" << (sink_opts.page ? " live page at " + url : "")
            << (sink_opts.page && sink_opts.prometheus ? "," : "")
            << (sink_opts.prometheus ? " Prometheus metrics at " + url + "metrics" : "")
            << std::endl;
  }
  return sinks;
}

/// The run in this process. Everything it holds (the rendezvous, the sinks) is gone before the
/// actor system is.
exit_status run_in_process(const run_options& opt, const graph::loaded_graph& g,
                           const runtime::kind_registry& kinds,
                           const std::set<std::string>& workers, const std::string& host,
                           uint16_t port, caf::actor_system& sys, context& ctx) {
  runtime::run_request req;
  req.run_dir = !opt.resume.empty() ? opt.resume : opt.run_dir;
  req.resume = !opt.resume.empty();
  req.strict_resume = opt.strict_resume;
  req.warn = [&ctx](const std::string& line) {
    ctx.err << "milesrt run: warning: " << line << std::endl;
  };
  req.progress = opt.quiet ? nullptr : stderr;
  // The run directory and the sinks (files, the server's port) before anything starts.
  const auto run_dir = runtime::resolve_run_dir(g, req);
  if (auto problem = runtime::unwritable_dir(run_dir); !problem.empty()) {
    print_error(ctx.err, "run", problem);
    return exit_status::bad_input;
  }
  req.sinks = start_sinks(opt, g, run_dir, ctx);
  if (!req.sinks) return exit_status::bad_input;
  std::unique_ptr<runtime::worker_rendezvous> rendezvous;
  if (!opt.listen.empty()) {
    try {
      runtime::join_policy policy{workers, opt.secret, [&ctx](const std::string& line) {
                                    ctx.err << "milesrt run: warning: " << line << std::endl;
                                  }};
      rendezvous = std::make_unique<runtime::worker_rendezvous>(sys, host, port, policy);
      ctx.out << "milesrt run: workers join at " << (host.empty() ? "*" : host) << ":"
              << rendezvous->port() << (opt.secret.empty() ? "" : " (with the shared secret)")
              << std::endl;
      auto wait = std::chrono::milliseconds(
          static_cast<int64_t>(g.reader().getRun().getWorkerWaitSeconds() * 1000));
      rendezvous->wait_for(workers, wait);
    } catch (const std::exception& e) {
      print_error(ctx.err, "run", e.what());
      return exit_status::run_failed;
    }
    auto deadline = std::chrono::milliseconds(
        static_cast<int64_t>(g.reader().getRun().getDeadlineSeconds() * 1000));
    auto* r = rendezvous.get();
    req.worker_directory = r->directory();
    req.remote = [r, deadline](const std::string& w, const runtime::spawn_request& s) {
      return r->spawn(w, s, deadline);
    };
  }
  auto outcome = runtime::run_graph(sys, g, kinds, req);
  if (!outcome.ok) {
    print_error(ctx.err, "run", outcome.error);
    return outcome.refused ? exit_status::bad_input : exit_status::run_failed;
  }
  ctx.out << "milesrt run: metrics in "
          << (runtime::resolve_run_dir(g, req) / "metrics.jsonl").string() << "\n";
  return exit_status::ok;
}

/// Checks --listen and the shared secret (read into `opt.secret`); false (the error printed) when
/// the address is malformed, or reachable from other machines without a secret.
bool check_listen(run_options& opt, std::string& host, uint16_t& port, context& ctx) {
  if (opt.listen.empty()) {
    if (opt.secret_file.empty()) return true;
    print_error(ctx.err, "run", "--secret-file needs --listen HOST:PORT");
    return false;
  }
  if (!parse_address(opt.listen, host, port)) {
    print_error(ctx.err, "run", "--listen " + opt.listen + ": expected HOST:PORT");
    return false;
  }
  try {
    opt.secret = load_secret(opt.secret_file);
  } catch (const std::invalid_argument& e) {
    print_error(ctx.err, "run", e.what());
    return false;
  }
  if (opt.secret.empty() && !is_loopback(host)) {
    print_error(ctx.err, "run",
                "--listen " + opt.listen +
                    ": not a loopback address, so other machines could join the run; give "
                    "workers a shared secret with --secret-file FILE or " +
                    kSecretVariable + " (on the run and on each worker)");
    return false;
  }
  return true;
}

exit_status run_command(run_options& opt, context& ctx) {
  if (opt.strict_resume && opt.resume.empty() && !opt.supervise) {
    print_error(ctx.err, "run", "--strict-resume needs --resume RUN_DIR or --supervise");
    return exit_status::bad_input;
  }
  if (opt.max_restarts_given && !opt.supervise) {
    print_error(ctx.err, "run", "--max-restarts needs --supervise");
    return exit_status::bad_input;
  }
  caf::actor_system_config config;
  config.add_message_types<caf::id_block::milesrt_runtime>();
  auto prepared = prepare_graph(opt.file, opt.sets, ctx, "run", true, config);
  if (!prepared) return exit_status::bad_input;
  const auto& g = *prepared->graph;

  std::set<std::string> workers;
  for (auto a : g.reader().getActors())
    if (a.getPlacement().size() > 0) workers.insert(a.getPlacement());
  std::string host;
  uint16_t port = 0;
  if (!check_listen(opt, host, port, ctx)) return exit_status::bad_input;
  if (!workers.empty() && opt.listen.empty()) {
    print_error(ctx.err, "run",
                opt.file + ": actors are placed on workers (" + *workers.begin() +
                    (workers.size() > 1 ? ", ..." : "") +
                    ") but no --listen HOST:PORT was given for them to join");
    return exit_status::bad_input;
  }
  if (opt.supervise) return run_supervised(opt, g, ctx);
  prepared->kinds.register_types(config);
  runtime::add_error_category(config);
  if (!opt.listen.empty()) config.load<caf::io::middleman>();
  auto sys = std::make_unique<caf::actor_system>(config);
  const exit_status status =
      run_in_process(opt, g, prepared->kinds, workers, host, port, *sys, ctx);
  return shut_down(std::move(sys), status, ctx);
}

}  // namespace

command make_run_command() {
  return {"run", "Run a graph file: start its actors and drive its schedule",
          [](CLI::App& app, context& ctx) -> runner {
            auto opt = std::make_shared<run_options>();
            add_run_options(app, *opt);
            return [opt, &ctx, &app] {
              opt->max_restarts_given = app.count("--max-restarts") > 0;
              return run_command(*opt, ctx);
            };
          }};
}

}  // namespace milesrt::cli
