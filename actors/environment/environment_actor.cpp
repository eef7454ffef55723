// The environment kind's actor: episodes as small state machines driven by the generation
// service's answers. An episode's turn: extend its session with the conversation so far (the new
// messages' tokens appended as the environment's), sample through the rollout, append the sampled
// tokens as they came, parse the reply's tool calls, and hand the reply to the environment.
#include "actors/environment/environment_actor.hpp"

#include <caf/all.hpp>
#include <cmath>
#include <deque>
#include <map>
#include <optional>

#include "actors/environment/episode_stats.hpp"
#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/agent/session.hpp"
#include "actors/lib/agent/trajectory.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/services.hpp"

namespace milesrt::environment {
namespace {
using namespace milesrt::runtime;
using clock = std::chrono::steady_clock;

/// One episode under way.
struct episode_run {
  uint64_t group = 0;
  size_t slot = 0;
  bool alt = false;  ///< an evaluation episode of the second environment
  std::unique_ptr<episode> ep;
  std::unique_ptr<agent::session> sess;
  json pending = json::array();  ///< messages not yet in the session
  json tools = json::array();
  double temperature = 1.0;
  clock::time_point start;
  episode_outcome outcome;
};

/// A task's episodes (or an evaluation round's), answered when all ended.
struct group_run {
  bool eval = false;
  caf::response_promise promise;
  envelope header;  ///< the task's envelope (origin, source)
  llm::prompt_msg prompt;
  size_t pending = 0;
  std::vector<std::optional<agent::trajectory>> trajectories;
  std::vector<episode_outcome> outcomes;
  std::vector<bool> alt;
};

/// Totals since the start, reported with every answer.
struct totals {
  uint64_t episodes = 0, groups = 0, malformed = 0, empty_episodes = 0;
  std::map<end_reason, uint64_t> ended;
};

struct env_state {
  actor_config cfg;
  agent::tool_call_format format = agent::tool_call_format::none;
  service_links links;
  std::map<uint64_t, group_run> groups;
  std::map<uint64_t, episode_run> episodes;
  uint64_t next_group = 0, next_episode = 0, requests = 0;
  totals counts;
  // Evaluation.
  uint64_t next_eval = 0;
  bool eval_running = false;
  std::deque<std::pair<caf::response_promise, node_reply>> held;  ///< answers held during it
  metric_map eval_metrics;  ///< the last evaluation's figures, not yet reported
  std::string failure;      ///< an evaluation's failure, given to every later answer
};

using env_actor = caf::stateful_actor<env_state>*;
using eval_atom = caf::atom_constant<caf::atom("env_eval")>;

void next_turn(env_actor self, uint64_t id);

/// Ends every episode of `group` and fails its answer (or, for an evaluation, every answer from
/// now on) with `message`.
void fail_group(env_actor self, uint64_t group, const std::string& message) {
  auto& st = self->state;
  auto it = st.groups.find(group);
  if (it == st.groups.end()) return;
  const std::string text = "environment '" + st.cfg.name + "': " + message;
  if (it->second.eval) {
    st.failure = text;
    st.eval_running = false;
    for (auto& [promise, _] : st.held)
      promise.deliver(caf::make_error(caf::sec::runtime_error, text));
    st.held.clear();
  } else {
    it->second.promise.deliver(caf::make_error(caf::sec::runtime_error, text));
  }
  for (auto e = st.episodes.begin(); e != st.episodes.end();)
    e = e->second.group == group ? st.episodes.erase(e) : std::next(e);
  st.groups.erase(it);
}

metric_map totals_metrics(const env_state& st) {
  metric_map m;
  m["env_episodes_total"] = double(st.counts.episodes);
  m["env_tool_calls_malformed_total"] = double(st.counts.malformed);
  m["env_empty_episodes_total"] = double(st.counts.empty_episodes);
  for (auto r : kEndReasons) {
    auto it = st.counts.ended.find(r);
    m[std::string("env_ended_") + to_string(r) + "_total"] =
        double(it == st.counts.ended.end() ? 0 : it->second);
  }
  return m;
}

/// The sample group of a task's ended episodes, and its answer.
node_reply group_reply(env_actor self, group_run& g) {
  auto& st = self->state;
  llm::sample_group out;
  out.group_id = g.prompt.group_id;
  out.label = g.prompt.label;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < g.trajectories.size(); ++i) {
    auto& t = g.trajectories[i];
    if (!t || t->output.empty()) {
      st.counts.empty_episodes++;  // no turn was sampled (a limit came first): nothing to train
      continue;
    }
    llm::sample_msg m;
    m.prompt = std::move(t->prompt);
    m.output = std::move(t->output);
    m.logprobs = std::move(t->logprobs);
    m.versions = std::move(t->versions);
    m.mask = std::move(t->mask);
    m.reward = static_cast<float>(g.outcomes[i].reward);
    m.finish_reason = to_string(g.outcomes[i].reason);
    std::vector<llm::token_id> ids(m.output.begin(), m.output.end());
    m.text = st.cfg.tok->decode(ids, true);
    lo = std::min(lo, t->min_version);
    hi = std::max(hi, t->max_version);
    out.samples.push_back(std::move(m));
  }
  envelope e = g.header;
  e.min_version = lo == UINT64_MAX ? g.header.min_version : lo;
  e.max_version = lo == UINT64_MAX ? g.header.max_version : hi;
  node_reply reply;
  reply.metrics = summarize(g.outcomes, "env_");
  double sum = 0, sq = 0;
  for (const auto& o : g.outcomes) sum += o.reward;
  const double mean = g.outcomes.empty() ? 0 : sum / double(g.outcomes.size());
  for (const auto& o : g.outcomes) sq += (o.reward - mean) * (o.reward - mean);
  reply.metrics["reward_mean"] = mean;
  reply.metrics["reward_std"] = g.outcomes.empty() ? 0 : std::sqrt(sq / double(g.outcomes.size()));
  for (auto& [k, v] : totals_metrics(st)) reply.metrics[k] = v;
  e.payload = caf::make_message(std::move(out));
  if (!e.payload.get_as<llm::sample_group>(0).samples.empty())
    reply.outputs.push_back({"groups", std::move(e)});
  return reply;
}

/// Answers (or holds) a training group; reports an evaluation.
void finish_group(env_actor self, uint64_t group) {
  auto& st = self->state;
  auto it = st.groups.find(group);
  if (it == st.groups.end()) return;
  group_run g = std::move(it->second);
  st.groups.erase(it);
  if (g.eval) {
    std::vector<episode_outcome> first, alt;
    for (size_t i = 0; i < g.outcomes.size(); ++i)
      (g.alt[i] ? alt : first).push_back(g.outcomes[i]);
    st.eval_metrics = summarize(first, "eval_env_");
    for (auto& [k, v] : summarize(alt, "eval_env_alt_")) st.eval_metrics[k] = v;
    st.eval_running = false;
    while (!st.held.empty()) {
      auto [promise, reply] = std::move(st.held.front());
      st.held.pop_front();
      for (auto& [k, v] : st.eval_metrics) reply.metrics[k] = v;
      st.eval_metrics.clear();
      promise.deliver(std::move(reply));
    }
    return;
  }
  st.counts.groups++;
  node_reply reply = group_reply(self, g);
  if (st.eval_running) {
    st.held.emplace_back(std::move(g.promise), std::move(reply));
    return;
  }
  for (auto& [k, v] : st.eval_metrics) reply.metrics[k] = v;
  st.eval_metrics.clear();
  g.promise.deliver(std::move(reply));
}

void end_episode(env_actor self, uint64_t id, end_reason why) {
  auto& st = self->state;
  auto it = st.episodes.find(id);
  if (it == st.episodes.end()) return;
  auto& run = it->second;
  run.outcome.reason = why;
  run.outcome.tokens = static_cast<uint32_t>(run.sess->tokens().size());
  auto g = st.groups.find(run.group);
  if (g != st.groups.end()) {
    g->second.outcomes[run.slot] = run.outcome;
    if (!g->second.eval) {
      g->second.trajectories[run.slot] = agent::to_trajectory(run.sess->tokens());
      st.counts.episodes++;
      st.counts.ended[why]++;
    }
  }
  const uint64_t group = run.group;
  st.episodes.erase(it);
  if (g != st.groups.end() && --g->second.pending == 0) finish_group(self, group);
}

/// Takes an observation: its reward, tools and messages; whether the episode goes on.
bool observe(episode_run& run, const observation& o) {
  run.outcome.reward += o.reward;
  run.outcome.tool_calls += o.tool_calls;
  run.outcome.tool_errors += o.tool_errors;
  if (!o.tools.is_null()) run.tools = o.tools;
  for (const auto& m : o.messages) run.pending.push_back(m);
  return !o.done;
}

/// The model's turn came back: record it, hand the reply to the environment, go on or end.
void take_turn(env_actor self, uint64_t id, serving::generation_result& r) {
  auto& st = self->state;
  auto it = st.episodes.find(id);
  if (it == st.episodes.end()) return;  // its group failed meanwhile
  auto& run = it->second;
  auto g = st.groups.find(run.group);
  if (!g->second.eval && !r.versions.empty()) {
    const uint64_t v = *std::max_element(r.versions.begin(), r.versions.end());
    if (!st.cfg.eval_tasks.empty() && !st.eval_running && v >= st.next_eval) {
      st.next_eval =
          st.cfg.eval_every == 0 ? UINT64_MAX : (v / st.cfg.eval_every + 1) * st.cfg.eval_every;
      self->send(self, eval_atom::value);
      st.eval_running = true;  // from now on, finished groups wait for it
    }
  }
  std::vector<llm::token_id> ids(r.output_ids.begin(), r.output_ids.end());
  auto reply = agent::parse_reply(agent::reply_text(*st.cfg.tok, ids), st.format,
                                  "call_" + std::to_string(run.outcome.turns) + "_");
  st.counts.malformed += reply.malformed;
  run.outcome.malformed += static_cast<uint32_t>(reply.malformed);
  json message = agent::assistant_message(reply);
  run.sess->append_sampled(ids, r.logprobs, r.versions, message);
  run.outcome.turns++;
  observation o;
  try {
    o = run.ep->step(message);
  } catch (const std::exception& e) {
    return fail_group(self, run.group, e.what());
  }
  if (!observe(run, o)) return end_episode(self, id, end_reason::done);
  const auto& lim = st.cfg.limits;
  if (run.outcome.turns >= lim.max_turns) return end_episode(self, id, end_reason::turns);
  if (std::chrono::duration<double>(clock::now() - run.start).count() > lim.max_seconds)
    return end_episode(self, id, end_reason::time);
  next_turn(self, id);
}

/// Why an episode cannot start: its opening alone leaves no room for the model's first turn
/// (every episode of every task would end so, and nothing would ever train).
std::string no_room(const episode_limits& lim, const std::string& what) {
  return "the opening of an episode (" + what + ") leaves no room for the model's first turn " +
         "within maxTokens = " + std::to_string(lim.max_tokens) + ": raise maxTokens";
}

/// Renders what the episode has not seen yet into its session and samples the model's turn.
void next_turn(env_actor self, uint64_t id) {
  auto& st = self->state;
  auto& run = st.episodes.at(id);
  json conversation = run.sess->messages();
  for (const auto& m : run.pending) conversation.push_back(m);
  llm::chat_options options;
  options.add_generation_prompt = true;
  if (!run.tools.empty()) options.tools = run.tools;
  auto ext = run.sess->extend(conversation, options);
  if (ext.error) {
    using kind = agent::session_error::kind;
    if (ext.error->what == kind::too_long && run.outcome.turns == 0)
      return fail_group(self, run.group, no_room(st.cfg.limits, ext.error->message));
    if (ext.error->what == kind::too_long) return end_episode(self, id, end_reason::tokens);
    // Messages that are no conversation are the environment's fault; a rendering that cannot
    // keep the episode's tokens exact ends the episode (counted), not the run.
    if (ext.error->what == kind::bad_request)
      return fail_group(self, run.group,
                        "its messages are not a conversation: " + ext.error->message);
    return end_episode(self, id, end_reason::render);
  }
  run.pending = json::array();
  const size_t used = run.sess->tokens().size();
  const auto& lim = st.cfg.limits;
  if (used >= lim.max_tokens && run.outcome.turns == 0)
    return fail_group(self, run.group, no_room(lim, std::to_string(used) + " tokens"));
  if (used >= lim.max_tokens) return end_episode(self, id, end_reason::tokens);
  if (!st.links.ready("generate"))
    return fail_group(self, run.group,
                      "no generation service joined (an edge to rollout.generate)");
  serving::generation_request req;
  req.input_ids.assign(run.sess->tokens().ids.begin(), run.sess->tokens().ids.end());
  req.temperature = run.temperature;
  req.top_p = st.cfg.top_p;
  req.max_tokens = std::min<int64_t>(lim.max_new_tokens, int64_t(lim.max_tokens - used));
  req.seed = st.cfg.seed * 1000003 + (st.requests++) * 7919;
  self->request(st.links.pick("generate"), st.cfg.generate_deadline, serving::generate_atom::value,
                std::move(req))
      .then([self, id](serving::generation_result& r) { take_turn(self, id, r); },
            [self, id](caf::error& err) {
              auto it = self->state.episodes.find(id);
              if (it == self->state.episodes.end()) return;
              fail_group(self, it->second.group,
                         "generation failed: " + self->system().render(err));
            });
}

/// Opens the episodes of a group: one per (task, environment) pair given.
void start_group(env_actor self, uint64_t group, const std::vector<task>& tasks,
                 const std::vector<bool>& alt, double temperature) {
  auto& st = self->state;
  std::vector<uint64_t> started;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const uint64_t id = st.next_episode++;
    episode_run run;
    run.group = group;
    run.slot = i;
    run.alt = alt[i];
    run.temperature = temperature;
    run.start = clock::now();
    run.sess = std::make_unique<agent::session>(st.cfg.tok, st.cfg.tmpl, st.cfg.limits.max_tokens);
    auto& env = run.alt ? *st.cfg.eval_alt : *st.cfg.env;
    run.tools = env.tools();
    try {
      run.ep = env.open(tasks[i], "g" + std::to_string(group) + "-e" + std::to_string(i));
      observation o = run.ep->reset();
      observe(run, o);
    } catch (const std::exception& e) {
      return fail_group(self, group, e.what());
    }
    st.episodes.emplace(id, std::move(run));
    started.push_back(id);
  }
  for (auto id : started) {
    if (st.episodes.count(id) == 0) return;  // the group failed
    next_turn(self, id);
  }
}

/// The task of a prompt.
task task_of(const llm::prompt_msg& p) {
  task t;
  t.prompt = p.text;
  t.label = p.label;
  t.group_id = p.group_id;
  if (!p.messages_json.empty()) t.messages = json::parse(p.messages_json, nullptr, false);
  if (t.messages.is_discarded() || !t.messages.is_array()) t.messages = json::array();
  return t;
}

void start_eval(env_actor self) {
  auto& st = self->state;
  const uint64_t group = st.next_group++;
  group_run g;
  g.eval = true;
  std::vector<task> tasks;
  for (const auto& t : st.cfg.eval_tasks) {
    tasks.push_back(t);
    g.alt.push_back(false);
    if (!st.cfg.eval_alt) continue;
    tasks.push_back(t);
    g.alt.push_back(true);
  }
  g.pending = tasks.size();
  g.outcomes.resize(tasks.size());
  g.trajectories.resize(tasks.size());
  const std::vector<bool> alt = g.alt;
  st.groups.emplace(group, std::move(g));
  start_group(self, group, tasks, alt, st.cfg.eval_temperature);
}

caf::behavior environment_fn(env_actor self, actor_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.format = agent::detect_tool_call_format(st.cfg.tmpl->source());
  return {
      [=](uses_atom, const std::string& port, std::vector<caf::actor>& servers) {
        self->state.links.set(port, std::move(servers));
      },
      [=](eval_atom) { start_eval(self); },
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto& s = self->state;
        if (!s.failure.empty()) return caf::make_error(caf::sec::runtime_error, s.failure);
        if (port != "prompts" || !e.payload.match_elements<llm::prompt_msg>())
          return caf::make_error(
              caf::sec::unexpected_message,
              "environment: port 'prompts' expects a prompt_msg (got port '" + port + "')");
        const auto& p = e.payload.get_as<llm::prompt_msg>(0);
        const uint64_t group = s.next_group++;
        group_run g;
        g.promise = self->make_response_promise();
        g.header = e;
        g.header.payload = caf::message{};
        g.prompt = p;
        g.pending = s.cfg.group_size;
        g.outcomes.resize(s.cfg.group_size);
        g.trajectories.resize(s.cfg.group_size);
        g.alt.assign(s.cfg.group_size, false);
        s.groups.emplace(group, std::move(g));
        start_group(self, group, std::vector<task>(s.cfg.group_size, task_of(p)),
                    std::vector<bool>(s.cfg.group_size, false), s.cfg.temperature);
        return caf::delegated<node_reply>();
      },
      // Episodes under way are not kept: a resumed run starts its tasks' episodes again.
      [=](snapshot_atom, const std::string&) { return runtime::actor_state{}; },
      [=](restore_atom, const std::string&, const runtime::actor_state&) { return true; },
  };
}

}  // namespace

caf::actor spawn_environment_actor(caf::actor_system& sys, actor_config config) {
  return sys.spawn<caf::detached>(environment_fn, std::move(config));
}

}  // namespace milesrt::environment
