#include "runtime/testing/toy_kinds.hpp"

#include <caf/all.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <thread>

#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::toy {
namespace {
using namespace milesrt::runtime;

std::vector<uint8_t> pack(std::initializer_list<uint64_t> values) {
  std::vector<uint8_t> out(values.size() * 8);
  size_t i = 0;
  for (uint64_t v : values) std::memcpy(out.data() + 8 * i++, &v, 8);
  return out;
}

bool unpack(const std::vector<uint8_t>& bytes, std::initializer_list<uint64_t*> values) {
  if (bytes.size() != values.size() * 8) return false;
  size_t i = 0;
  for (uint64_t* v : values) std::memcpy(v, bytes.data() + 8 * i++, 8);
  return true;
}

int64_t int_param(const actor_setup& s, const std::string& name) {
  return std::get<int64_t>(s.params.at(name));
}

uint64_t value_of(const envelope& e) {
  return e.payload.match_elements<uint64_t>() ? e.payload.get_as<uint64_t>(0) : 0;
}

// -- toy_source: emits 0, 1, 2, ... up to `limit` items (0: no limit).

struct source_state {
  uint64_t next = 0;
};

source_actor::behavior_type source_fn(source_actor::stateful_pointer<source_state> self,
                                      uint64_t limit, int64_t stall_after) {
  return {
      [=](produce_atom, uint64_t count) -> caf::result<node_reply> {
        if (stall_after >= 0 && self->state.next >= uint64_t(stall_after)) {
          return caf::delegated<node_reply>();  // never answered: the requester's deadline passes
        }
        node_reply reply;
        for (uint64_t i = 0; i < count && (limit == 0 || self->state.next < limit); ++i) {
          envelope e;
          e.payload = caf::make_message(self->state.next++);
          reply.outputs.push_back({"items", std::move(e)});
        }
        return reply;
      },
      [=](snapshot_atom, const std::string&) { return actor_state{pack({self->state.next})}; },
      [=](restore_atom, const std::string&, const actor_state& s) {
        return unpack(s.bytes, {&self->state.next});
      },
  };
}

// -- toy_stage: stamps items with the version it last received on `weights`.

struct stage_state {
  uint64_t version = 0;
  uint64_t processed = 0;
};

struct stage_knobs {
  int64_t stall_after = -1;      // stop answering after this many items
  int64_t die_after = -1;        // terminate with an error after this many items
  int64_t drop_every = 0;        // emit nothing for every k-th item (a filter)
  int64_t delay_ms = 0;          // time each item takes (the actor is then detached: it blocks)
  int64_t die_per_mille = 0;     // chance (in 1000) of dying at each message, publications and
                                 // snapshots included: kill points at random, from `seed`
  uint64_t seed = 0;             // this incarnation's stream of kill points
  bool restores_version = true;  // false: its state leaves out the version, which starts at 0
                                 // (held in files the stage reads at start)
  bool value_metric = false;     // each reply reports 1/(item's value + 1) as `item_inverse`
  int64_t fail_every = 0;        // answer every k-th item with an error of class `fail_class`
  milesrt::errc fail_class = milesrt::errc::internal;
};

/// The error class named by the `fail_class` parameter.
milesrt::errc error_class(const std::string& name) {
  for (auto c : {milesrt::errc::bad_input, milesrt::errc::transient, milesrt::errc::resource,
                 milesrt::errc::internal, milesrt::errc::cancelled})
    if (milesrt::to_string(c) == name) return c;
  throw std::invalid_argument("fail_class '" + name +
                              "' is not bad_input, transient, resource, internal or cancelled");
}

/// True (and the actor quits) when this message is one of the stage's random kill points.
bool dies_now(stage_actor::stateful_pointer<stage_state> self, const stage_knobs& knobs,
              std::mt19937_64& rng, const char* at) {
  if (knobs.die_per_mille <= 0) return false;
  if (std::uniform_int_distribution<int64_t>(0, 999)(rng) >= knobs.die_per_mille) return false;
  self->quit(caf::make_error(caf::sec::runtime_error,
                             std::string("toy stage killed at random, at ") + at));
  return true;
}

stage_actor::behavior_type stage_fn(stage_actor::stateful_pointer<stage_state> self,
                                    stage_knobs knobs) {
  auto rng = std::make_shared<std::mt19937_64>(knobs.seed);
  return {
      [=](process_atom, const std::string& port, envelope& e) -> caf::result<node_reply> {
        auto& st = self->state;
        if (dies_now(self, knobs, *rng, port.c_str())) return caf::delegated<node_reply>();
        node_reply reply;
        if (port == "weights") {
          st.version = value_of(e);
          return reply;
        }
        st.processed++;
        if (knobs.die_after >= 0 && st.processed > uint64_t(knobs.die_after)) {
          self->quit(caf::make_error(
              caf::sec::runtime_error,
              "toy_stage told to die after " + std::to_string(knobs.die_after) + " items"));
          return caf::delegated<node_reply>();
        }
        if (knobs.stall_after >= 0 && st.processed > uint64_t(knobs.stall_after)) {
          return caf::delegated<node_reply>();  // never answered: the requester's deadline passes
        }
        if (knobs.delay_ms > 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(knobs.delay_ms));
        if (knobs.fail_every > 0 && st.processed % uint64_t(knobs.fail_every) == 0)
          return runtime::make_failure(
              knobs.fail_class, "toy_stage refuses item " + std::to_string(value_of(e)) + " (" +
                                    milesrt::to_string(knobs.fail_class) + ")");
        if (knobs.drop_every > 0 && st.processed % uint64_t(knobs.drop_every) == 0) return reply;
        e.min_version = e.max_version = st.version;
        reply.metrics["version_seen"] = double(st.version);
        if (knobs.value_metric) reply.metrics["item_inverse"] = 1.0 / double(value_of(e) + 1);
        reply.outputs.push_back({"items", std::move(e)});
        return reply;
      },
      [=](snapshot_atom, const std::string&) -> caf::result<actor_state> {
        if (dies_now(self, knobs, *rng, "snapshot")) return caf::delegated<actor_state>();
        return actor_state{pack({self->state.version, self->state.processed})};
      },
      [=](restore_atom, const std::string&, const actor_state& s) -> caf::result<bool> {
        if (dies_now(self, knobs, *rng, "restore")) return caf::delegated<bool>();
        uint64_t version = 0;
        if (!unpack(s.bytes, {&version, &self->state.processed})) return false;
        if (knobs.restores_version) self->state.version = version;
        return true;
      },
  };
}

// -- toy_learner: version + 1 per step; reports the sum of the values it trained on.

struct learner_state {
  uint64_t version = 0;
  uint64_t total = 0;
};

learner_actor::behavior_type learner_fn(learner_actor::stateful_pointer<learner_state> self,
                                        int64_t stall_at_step, int64_t die_at_step,
                                        int64_t delay_ms, std::string prefix) {
  return {
      [=](train_atom, uint64_t step,
          const std::vector<envelope>& batch) -> caf::result<train_reply> {
        auto& st = self->state;
        if (die_at_step >= 0 && step == uint64_t(die_at_step)) {
          self->quit(caf::make_error(caf::sec::runtime_error,
                                     "toy_learner told to die at step " + std::to_string(step)));
          return caf::delegated<train_reply>();
        }
        if (stall_at_step >= 0 && step == uint64_t(stall_at_step)) {
          return caf::delegated<train_reply>();
        }
        if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        uint64_t sum = 0;
        for (const auto& e : batch) sum += value_of(e);
        st.total += sum;
        st.version++;
        train_reply reply;
        reply.version = st.version;
        reply.metrics[prefix + "batch_sum"] = double(sum);
        reply.metrics[prefix + "batch_items"] = double(batch.size());
        reply.metrics[prefix + "total"] = double(st.total);
        reply.metrics[prefix + "loss"] = 1.0 / double(st.version);
        envelope w;
        w.payload = caf::make_message(st.version);
        w.min_version = w.max_version = st.version;
        reply.outputs.push_back({"weights", std::move(w)});
        return reply;
      },
      [=](snapshot_atom, const std::string& dir) {
        // A file of its own beside the inline state, as a model checkpoint would be.
        std::ofstream(dir + "/weights.txt") << self->state.version << "\n";
        return actor_state{pack({self->state.version, self->state.total})};
      },
      [=](restore_atom, const std::string& dir, const actor_state& s) {
        uint64_t from_file = 0;
        std::ifstream in(dir + "/weights.txt");
        if (!(in >> from_file)) return false;
        if (!unpack(s.bytes, {&self->state.version, &self->state.total})) return false;
        return from_file == self->state.version;
      },
  };
}

// -- toy_buffer: first in, first out; drops what is staler than the driver's bound when taking;
// `refuse` serves no batch at all (a broken policy).

struct buffer_state {
  std::deque<envelope> held;
  uint64_t dropped = 0;
};

buffer_actor::behavior_type buffer_fn(buffer_actor::stateful_pointer<buffer_state> self,
                                      bool refuse) {
  return {
      [=](put_atom, const std::string&, const envelope& e, uint64_t) {
        self->state.held.push_back(e);
        buffer_reply reply;
        reply.kept = 1;
        reply.size = self->state.held.size();
        return reply;
      },
      [=](take_atom, uint64_t count, uint64_t version, bool discard_rest, uint64_t drop_past) {
        auto& st = self->state;
        buffer_reply reply;
        std::deque<envelope> rest;
        for (auto& e : st.held) {
          if (version > e.min_version && version - e.min_version > drop_past) {
            reply.dropped_stale++;
          } else {
            rest.push_back(std::move(e));
          }
        }
        st.held = std::move(rest);
        st.dropped += reply.dropped_stale;
        if (!refuse && st.held.size() >= count) {
          reply.items.assign(st.held.begin(), st.held.begin() + count);
          st.held.erase(st.held.begin(), st.held.begin() + count);
          if (discard_rest) {
            reply.surplus = st.held.size();
            st.held.clear();
          }
        }
        reply.size = st.held.size();
        reply.metrics["toy_buffer_dropped"] = double(st.dropped);
        return reply;
      },
      [=](snapshot_atom, const std::string&) -> caf::result<actor_state> {
        std::vector<envelope> items(self->state.held.begin(), self->state.held.end());
        std::vector<char> buf;
        caf::binary_serializer sink{self->system(), buf};
        if (auto err = sink(items, self->state.dropped)) return err;
        return actor_state{{buf.begin(), buf.end()}};
      },
      [=](restore_atom, const std::string&, const actor_state& s) {
        std::vector<envelope> items;
        std::vector<char> buf(s.bytes.begin(), s.bytes.end());
        caf::binary_deserializer source{self->system(), buf};
        if (source(items, self->state.dropped)) return false;
        self->state.held.assign(items.begin(), items.end());
        return true;
      },
  };
}

// -- toy_relay: passes each version on from `weights` to `updates` (a second hop of publication).

stage_actor::behavior_type relay_fn(stage_actor::pointer) {
  return {
      [=](process_atom, const std::string&, envelope& e) -> caf::result<node_reply> {
        node_reply reply;
        reply.outputs.push_back({"updates", std::move(e)});
        return reply;
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

/// A stage spawned with its knobs: detached when it sleeps, so that it holds no shared thread.
caf::actor spawn_stage(caf::actor_system& sys, const stage_knobs& k) {
  if (k.delay_ms > 0) return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(stage_fn, k));
  return caf::actor_cast<caf::actor>(sys.spawn(stage_fn, k));
}

}  // namespace

/// toy_stage, toy_flaky_stage and toy_mortal_stage; toy_relay.
static void register_stages(runtime::kind_registry& registry, const std::string& item,
                            const std::string& version) {
  using runtime::param_type;
  kind_descriptor stage;
  stage.name = "toy_stage";
  stage.summary = "stamps each item with the version last received on `weights`";
  stage.role = role::stage;
  stage.inputs = {{"items", item, ""}, {"weights", version, "new versions from the learner"}};
  stage.outputs = {{"items", item, ""}};
  stage.params = {
      {"stall_after", param_type::integer, "stop answering after this many items (-1: never)",
       false, int64_t{-1}, -1.0, std::nullopt},
      {"die_after", param_type::integer, "fail after this many items (-1: never)", false,
       int64_t{-1}, -1.0, std::nullopt},
      {"drop_every", param_type::integer, "filter out every k-th item (0: none)", false, int64_t{0},
       0.0, std::nullopt},
      {"delay_ms", param_type::integer, "milliseconds each item takes (0: none)", false, int64_t{0},
       0.0, std::nullopt},
      {"restores_version", param_type::boolean,
       "false: a restore leaves the version at 0 (held in files, sent again by the learner)", false,
       true, std::nullopt, std::nullopt},
      {"value_metric", param_type::boolean,
       "each reply reports 1/(item's value + 1) as the metric item_inverse", false, false,
       std::nullopt, std::nullopt},
      {"fail_every", param_type::integer, "answer every k-th item with an error (0: none)", false,
       int64_t{0}, 0.0, std::nullopt},
      {"fail_class", param_type::text,
       "that error's class: bad_input, transient, resource, internal or cancelled", false,
       std::string("internal"), std::nullopt, std::nullopt},
  };
  stage.spawn = [](caf::actor_system& sys, const actor_setup& s) {
    stage_knobs k{int_param(s, "stall_after"), int_param(s, "die_after"),
                  int_param(s, "drop_every"), int_param(s, "delay_ms")};
    k.restores_version = std::get<bool>(s.params.at("restores_version"));
    k.value_metric = std::get<bool>(s.params.at("value_metric"));
    k.fail_every = int_param(s, "fail_every");
    k.fail_class = error_class(std::get<std::string>(s.params.at("fail_class")));
    return spawn_stage(sys, k);
  };
  registry.add(stage);

  kind_descriptor flaky = stage;
  flaky.name = "toy_flaky_stage";
  flaky.summary = "toy_stage whose dead replicas the runtime restarts";
  flaky.restartable = true;
  // A restarted replica is healthy: the knobs apply to the first incarnation only.
  flaky.spawn = [incarnations = std::make_shared<std::map<std::string, int>>()](
                    caf::actor_system& sys, const actor_setup& s) {
    auto key = s.name + "/" + std::to_string(s.replica);
    stage_knobs k{-1, -1, int_param(s, "drop_every"), int_param(s, "delay_ms")};
    if ((*incarnations)[key]++ == 0) {
      k.die_after = int_param(s, "die_after");
      k.fail_every = int_param(s, "fail_every");
      k.fail_class = error_class(std::get<std::string>(s.params.at("fail_class")));
    }
    k.restores_version = std::get<bool>(s.params.at("restores_version"));
    return spawn_stage(sys, k);
  };
  registry.add(flaky);

  kind_descriptor mortal = stage;
  mortal.name = "toy_mortal_stage";
  mortal.summary = "toy_stage that dies at random messages; the runtime restarts it";
  mortal.restartable = true;
  mortal.params.push_back({"die_per_mille", param_type::integer,
                           "chance in 1000 of dying at each message (publications, snapshots too)",
                           false, int64_t{0}, 0.0, 1000.0});
  // Each incarnation draws its kill points from its own stream: the run's seed, the replica and
  // how many incarnations came before.
  mortal.spawn = [incarnations = std::make_shared<std::map<std::string, uint64_t>>()](
                     caf::actor_system& sys, const actor_setup& s) {
    auto key = s.name + "/" + std::to_string(s.replica);
    stage_knobs k{-1, -1, int_param(s, "drop_every"), int_param(s, "delay_ms"),
                  int_param(s, "die_per_mille")};
    k.seed = s.seed * 1000003 + s.replica * 7919 + (*incarnations)[key]++;
    k.restores_version = std::get<bool>(s.params.at("restores_version"));
    return spawn_stage(sys, k);
  };
  registry.add(mortal);

  kind_descriptor relay;
  relay.name = "toy_relay";
  relay.summary = "passes each version on from `weights` to `updates`";
  relay.role = role::stage;
  relay.inputs = {{"weights", version, "new versions from the learner"}};
  relay.outputs = {{"updates", version, "the same versions, one hop on"}};
  relay.spawn = [](caf::actor_system& sys, const actor_setup&) {
    return caf::actor_cast<caf::actor>(sys.spawn(relay_fn));
  };
  registry.add(relay);
}

void register_kinds(runtime::kind_registry& registry) {
  using runtime::param_type;
  const std::string item = "toy.item", version = "toy.version";

  kind_descriptor source;
  source.name = "toy_source";
  source.summary = "emits the numbers 0, 1, 2, ... as work items";
  source.role = role::source;
  source.outputs = {{"items", item, "one number per item"}};
  source.params = {{"limit", param_type::integer, "items in all (0: unlimited)", false, int64_t{0},
                    0.0, std::nullopt},
                   {"stall_after", param_type::integer,
                    "stop answering once this many items were emitted (-1: never)", false,
                    int64_t{-1}, -1.0, std::nullopt}};
  source.spawn = [](caf::actor_system& sys, const actor_setup& s) {
    return caf::actor_cast<caf::actor>(
        sys.spawn(source_fn, uint64_t(int_param(s, "limit")), int_param(s, "stall_after")));
  };
  registry.add(source);

  register_stages(registry, item, version);
  register_service_kinds(registry, item, version);

  kind_descriptor learner;
  learner.name = "toy_learner";
  learner.summary = "sums the items of each batch; each step makes a new version";
  learner.role = role::learner;
  learner.inputs = {{"items", item, ""}};
  learner.outputs = {{"weights", version, "the new version after each step"}};
  learner.params = {
      {"stall_at_step", param_type::integer, "never answer this step (-1: none)", false,
       int64_t{-1}, -1.0, std::nullopt},
      {"die_at_step", param_type::integer, "fail at this step (-1: none)", false, int64_t{-1}, -1.0,
       std::nullopt},
      {"delay_ms", param_type::integer, "milliseconds each step takes (0: none)", false, int64_t{0},
       0.0, std::nullopt},
      {"prefix", param_type::text, "put before its metrics' names (a second learner's, say)", false,
       std::string(), std::nullopt, std::nullopt},
  };
  learner.spawn = [](caf::actor_system& sys, const actor_setup& s) {
    const auto delay = int_param(s, "delay_ms");
    const auto prefix = std::get<std::string>(s.params.at("prefix"));
    // A slow learner sleeps: detached, so that it holds no shared thread.
    if (delay > 0) {
      return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(
          learner_fn, int_param(s, "stall_at_step"), int_param(s, "die_at_step"), delay, prefix));
    }
    return caf::actor_cast<caf::actor>(sys.spawn(learner_fn, int_param(s, "stall_at_step"),
                                                 int_param(s, "die_at_step"), delay, prefix));
  };
  registry.add(learner);

  kind_descriptor buffer;
  buffer.name = "toy_buffer";
  buffer.summary = "holds the learner's items first in, first out";
  buffer.role = role::buffer;
  buffer.inputs = {{"items", item, ""}};
  buffer.outputs = {{"items", item, "the learner's batches"}};
  buffer.params = {
      {"refuse", param_type::boolean, "serve no batch, ever", false, false, std::nullopt,
       std::nullopt},
  };
  buffer.spawn = [](caf::actor_system& sys, const actor_setup& s) {
    return caf::actor_cast<caf::actor>(sys.spawn(buffer_fn, std::get<bool>(s.params.at("refuse"))));
  };
  registry.add(buffer);
}

}  // namespace milesrt::toy
