#include "runtime/driver/run.hpp"

#include <capnp/serialize.h>
#include <fcntl.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/core/log.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/metrics/metrics_writer.hpp"
#include "runtime/metrics/page_data.hpp"
#include "runtime/metrics/svg_plot.hpp"

namespace milesrt::runtime {
namespace fs = std::filesystem;

actor_setup make_setup(const graph::loaded_graph& g, schema::ActorSpec::Reader actor,
                       const kind_descriptor& kind, uint32_t replica, const fs::path& run_dir,
                       std::shared_ptr<process_store> store, std::FILE* progress) {
  actor_setup s;
  s.progress = progress;
  s.store = store ? std::move(store) : std::make_shared<process_store>();
  s.steps = g.reader().getRun().getSteps();
  s.batch_size = std::max<uint32_t>(1, g.reader().getRun().getBatchSize());
  s.name = actor.getName();
  s.replica = replica;
  s.seed = g.reader().getRun().getSeed();
  s.run_dir = run_dir;
  s.params = graph::resolve_params(actor, kind);
  if (!kind.params_member.empty()) {
    // An actor that leaves params at `none` gets the struct's defaults.
    std::shared_ptr<capnp::MallocMessageBuilder> storage;
    s.params_struct = graph::params_struct(actor, kind.params_member, storage);
    s.params_storage = storage;
  }
  return s;
}

namespace {

/// The run section's settings (and the schedule's) as the driver's plan holds them.
void plan_settings(const graph::loaded_graph& g, const fs::path& run_dir, graph_plan& plan) {
  auto r = g.reader();
  plan.graph_name = r.getName().size() ? std::string(r.getName()) : g.file().stem().string();
  plan.run_dir = run_dir;
  auto run = r.getRun();
  const auto ms = [](double secs) {
    return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
  };
  plan.batch_size = run.getBatchSize() == 0 ? 1 : run.getBatchSize();
  plan.steps = run.getSteps();
  plan.checkpoint_interval = run.getCheckpointInterval();
  plan.progress_metric = run.getProgressMetric();
  plan.worker_grace = ms(run.getWorkerGraceSeconds());
  plan.max_restarts = run.getMaxRestarts();
  plan.restart_window = ms(run.getRestartWindowSeconds());
  plan.max_startup_failures = run.getMaxStartupFailures();
  plan.max_over_sampling = run.getMaxOverSampling();
  if (r.getSchedule().isAsync()) {
    plan.schedule.async = true;
    plan.schedule.max_staleness = r.getSchedule().getAsync().getMaxStaleness();
    plan.schedule.drop_stale =
        r.getSchedule().getAsync().getOnStale() == schema::Schedule::OnStale::DROP;
  }
}

/// What builds the replicas of one actor: here, or on its worker.
struct actor_spawner {
  caf::actor_system* sys;
  const graph::loaded_graph* g;
  schema::ActorSpec::Reader actor;
  const kind_descriptor* kind;
  fs::path run_dir;
  remote_spawner remote;
  std::shared_ptr<process_store> store;
  std::FILE* progress;
  std::string placement;

  /// What a worker is asked to spawn: the whole graph, flat, and which replica of which actor.
  spawn_request request_of(uint32_t replica) const {
    spawn_request req;
    kj::Array<capnp::word> words =
        capnp::messageToFlatArray(const_cast<graph::loaded_graph&>(*g).message());
    auto bytes = words.asBytes();
    req.graph.assign(bytes.begin(), bytes.end());
    req.actor = actor.getName();
    req.replica = replica;
    return req;
  }

  caf::actor operator()(uint32_t replica) const {
    if (placement.empty())
      return kind->spawn(*sys, make_setup(*g, actor, *kind, replica, run_dir, store, progress));
    if (!remote) {
      throw std::runtime_error("actor '" + std::string(actor.getName()) +
                               "' is placed on worker '" + placement +
                               "' but this run accepts no workers (use --listen)");
    }
    return remote(placement, request_of(replica));
  }
};

/// One actor of the graph with its replicas started.
node_plan plan_node(const actor_spawner& spawn, double run_deadline_seconds) {
  node_plan n;
  n.name = spawn.actor.getName();
  n.kind = spawn.kind;
  n.placement = spawn.placement;
  const double secs = spawn.actor.getDeadlineSeconds() > 0 ? spawn.actor.getDeadlineSeconds()
                                                           : run_deadline_seconds;
  n.deadline = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
  if (!n.placement.empty())
    n.remote_request = [spawn](uint32_t replica) { return spawn.request_of(replica); };
  for (uint32_t i = 0; i < spawn.actor.getReplicas(); ++i) {
    caf::actor a;
    try {
      a = spawn(i);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot start actor '" + n.name + "' (kind " + spawn.kind->name +
                               "): " + e.what());
    }
    if (!a)
      throw std::runtime_error("the factory of kind '" + spawn.kind->name +
                               "' returned no actor for '" + n.name + "'");
    n.replicas.push_back(a);
  }
  n.respawn = spawn;
  return n;
}

/// The node's role in the plan: a source (with its weight), the learner or an auxiliary one, the
/// buffer.
void place_by_role(graph_plan& plan, schema::ActorSpec::Reader actor, const kind_descriptor& kind,
                   bool& has_learner) {
  const size_t at = plan.nodes.size();
  if (kind.role == role::source) {
    plan.sources.push_back(at);
    plan.source_weights.push_back(actor.getWeight() > 0 ? actor.getWeight() : 1.0);
  }
  if (kind.role == role::learner) {
    if (has_learner)
      plan.aux_learners.push_back(at);
    else
      plan.learner = at;
    has_learner = true;
  }
  if (kind.role == role::buffer) plan.buffer = at;
}

/// The graph's edges: data edges for the driver to route, service edges for it to bind.
void plan_edges(const graph::loaded_graph& g, const std::map<std::string, size_t>& index,
                graph_plan& plan) {
  for (auto edge : g.reader().getEdges()) {
    graph::endpoint from, to;
    graph::parse_endpoint(edge.getFrom(), from);
    graph::parse_endpoint(edge.getTo(), to);
    const size_t user = index.at(from.actor);
    if (graph::is_service_edge(*plan.nodes[user].kind, from.port)) {
      plan.services.push_back({user, from.port, index.at(to.actor), to.port});
      continue;
    }
    plan.edges.push_back(
        {index.at(from.actor), from.port, index.at(to.actor), to.port, edge.getCapacity()});
  }
}

}  // namespace

graph_plan build_plan(caf::actor_system& sys, const graph::loaded_graph& g,
                      const kind_registry& kinds, const fs::path& run_dir,
                      const remote_spawner& remote, std::FILE* progress) {
  graph_plan plan;
  plan_settings(g, run_dir, plan);
  std::map<std::string, size_t> index;
  bool has_learner = false;
  auto store = std::make_shared<process_store>();  // this process's actors share it
  const double run_deadline = g.reader().getRun().getDeadlineSeconds();
  for (auto actor : g.reader().getActors()) {
    const kind_descriptor* kind = kinds.find(actor.getKind());
    const actor_spawner spawn{
        &sys, &g, actor, kind, run_dir, remote, store, progress, actor.getPlacement()};
    node_plan n = plan_node(spawn, run_deadline);
    place_by_role(plan, actor, *kind, has_learner);
    index[n.name] = plan.nodes.size();
    plan.nodes.push_back(std::move(n));
  }
  plan_edges(g, index, plan);
  return plan;
}

sink_options sinks_for(const graph::loaded_graph& g, const fs::path& run_dir, int port) {
  auto run = g.reader().getRun();
  sink_options o;
  o.run_dir = run_dir;
  for (auto s : run.getSinks()) {
    switch (s) {
      case schema::Run::Sink::TENSORBOARD:
        o.tensorboard = true;
        break;
      case schema::Run::Sink::PROMETHEUS:
        o.prometheus = true;
        break;
      case schema::Run::Sink::PAGE:
        o.page = true;
        break;
    }
  }
  o.port = port >= 0 ? static_cast<uint16_t>(port) : run.getMetricsPort();
  std::vector<std::string> chart, plot;
  for (auto m : run.getChart()) chart.push_back(m);
  for (auto m : run.getPlot()) plot.push_back(m);
  o.charts = charted_metrics(chart, plot, run.getProgressMetric());
  return o;
}

std::string unwritable_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "run directory " + dir.string() + ": cannot create it: " + ec.message();
  // POSIX calls, so that the reason (a full disk, no permission, a file-size limit) is known.
  const fs::path probe = dir / ".milesrt-write-probe";
  std::string why;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    why = std::strerror(errno);
  } else {
    if (::write(fd, "x", 1) != 1 || ::fsync(fd) != 0) why = std::strerror(errno);
    if (::close(fd) != 0 && why.empty()) why = std::strerror(errno);
    fs::remove(probe, ec);
  }
  if (!why.empty()) return "run directory " + dir.string() + ": cannot write a file there: " + why;
  return "";
}

fs::path resolve_run_dir(const graph::loaded_graph& g, const run_request& req) {
  if (!req.run_dir.empty()) return req.run_dir;
  return fs::path(std::string(g.reader().getRun().getDir()));
}

namespace {

/// A run that ended before it started, with `error`.
run_outcome refused_run(std::string error, bool refused = false) {
  run_outcome o;
  o.finished = true;
  o.error = std::move(error);
  o.refused = refused;
  return o;
}

/// The test hook's fault (docs/testing.md: the one place MILESRT_TEST_KILL_REPLICA is read);
/// an error when the variable is set but malformed.
std::optional<std::string> read_test_fault(driver_options& opts) {
  const char* fault = std::getenv("MILESRT_TEST_KILL_REPLICA");
  if (!fault) return std::nullopt;
  opts.kill_replica = parse_replica_fault(fault);
  if (opts.kill_replica) return std::nullopt;
  return std::string(
             "MILESRT_TEST_KILL_REPLICA: expected ACTOR:REPLICA:ITEMS (items from 1), got '") +
         fault + "'";
}

/// With --resume: the checkpoint to resume from (a fallback past a corrupt newer one is warned
/// about), and metrics.jsonl cut back to it; the run that must not start otherwise.
std::optional<run_outcome> prepare_resume(const run_request& req, const fs::path& run_dir,
                                          driver_options& opts) {
  auto found = find_checkpoint(run_dir);
  const auto warn = [&req](const std::string& line) {
    if (req.warn) req.warn(line);
  };
  if (req.strict_resume && found.newer_corrupt)
    return refused_run("cannot resume (--strict-resume): " + *found.newer_corrupt, true);
  for (const auto& line : found.warnings) warn(line);
  if (!found.newest)
    return refused_run(
        "cannot resume: no complete checkpoint under " + (run_dir / "checkpoints").string(), true);
  if (found.newer_corrupt || !found.warnings.empty())
    warn("resuming from checkpoint " + found.newest->string() + " (step " +
         std::to_string(found.step) + ")");
  opts.resume = true;
  opts.resume_dir = *found.newest;
  // Steps a crashed run logged after this checkpoint are trained again: log them once.
  try {
    keep_steps_through(run_dir / "metrics.jsonl", found.step);
  } catch (const std::exception& e) {
    return refused_run("cannot resume from " + found.newest->string() + ": " + e.what());
  }
  return std::nullopt;
}

/// The driver's run to its end: its outcome, or nullopt when it stopped without one.
std::optional<run_outcome> drive(caf::actor_system& sys, graph_plan plan, driver_options opts) {
  std::promise<run_outcome> done;
  auto result = done.get_future();
  opts.on_finish = [&done](const run_outcome& o) { done.set_value(o); };
  caf::scoped_actor self{sys};
  auto driver = spawn_driver(sys, std::move(plan), std::move(opts));
  self->monitor(driver);
  // The driver ends every run itself (each of its requests has a deadline); its down message is
  // the one wait here, and it arrives even if the driver crashed.
  self->receive([](const caf::down_msg&) {});
  if (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
  return result.get();
}

/// summary.json and the plot of a run that ended; the summary line for the terminal.
std::string write_results(const graph::loaded_graph& g, const fs::path& run_dir,
                          const std::string& name, metrics_writer& writer, run_outcome& outcome) {
  std::string line;
  try {
    line = writer.on_finish(outcome);
  } catch (const std::exception& e) {
    // A summary that cannot be written fails the run (unless it failed already: keep that error).
    if (outcome.ok) outcome.error = e.what();
    outcome.ok = false;
  }
  if (g.reader().getRun().getPlot().size() > 0) {
    std::vector<std::string> names;
    for (auto m : g.reader().getRun().getPlot()) names.push_back(m);
    try {
      write_svg_plot(run_dir / "metrics.jsonl", names, run_dir / "plot.svg",
                     name + " (" + run_dir.string() + ")");
    } catch (const std::exception& e) {
      log::warn("no plot: {}", e.what());
    }
  }
  return line;
}

}  // namespace

run_outcome run_graph(caf::actor_system& sys, const graph::loaded_graph& g,
                      const kind_registry& kinds, const run_request& req) {
  const fs::path run_dir = resolve_run_dir(g, req);
  driver_options opts;
  if (auto bad = read_test_fault(opts)) return refused_run(*bad);
  if (req.resume)
    if (auto stop = prepare_resume(req, run_dir, opts)) return *stop;
  // The sinks before any actor starts: one that cannot open (a port in use) ends the run here.
  std::shared_ptr<metric_sinks> sinks = req.sinks;
  graph_plan plan;
  try {
    if (!sinks) sinks = std::make_shared<metric_sinks>(sinks_for(g, run_dir));
    plan = build_plan(sys, g, kinds, run_dir, req.remote, req.progress);
    plan.worker_directory = req.worker_directory;
  } catch (const std::exception& e) {
    return refused_run(e.what());
  }
  const std::string plan_name = plan.graph_name;
  auto writer = std::make_shared<metrics_writer>(run_dir, plan.graph_name, plan.progress_metric,
                                                 plan.steps, req.progress, req.resume);
  opts.on_step = [writer, sinks, on_step = req.on_step](const step_record& r) {
    writer->on_step(r);
    sinks->on_step(r);
    if (on_step) on_step(r);
  };
  opts.on_live = [sinks](const live_view& v) { sinks->on_live(v); };
  opts.progress = req.progress;
  auto ended = drive(sys, std::move(plan), std::move(opts));
  if (!ended) {
    auto failed = refused_run("the schedule driver stopped without a result");
    try {
      writer->on_finish(failed);
    } catch (const std::exception&) {  // the run failed already; the first error is the one told
    }
    return failed;
  }
  run_outcome outcome = std::move(*ended);
  sinks->on_finish();
  const std::string line = write_results(g, run_dir, plan_name, *writer, outcome);
  if (outcome.ok && req.progress) std::fprintf(req.progress, "%s\n", line.c_str());
  return outcome;
}

}  // namespace milesrt::runtime
