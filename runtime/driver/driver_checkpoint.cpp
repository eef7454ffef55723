// Checkpoints and resume: every actor's state and the driver's durable state.
#include <tuple>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/core/progress.hpp"
#include "runtime/driver/driver_state.hpp"

namespace milesrt::runtime::driver_impl {

/// The driver's durable state as `driver.bin` holds it.
static std::vector<uint8_t> serialize_driver(driver self) {
  std::vector<char> buf;
  caf::binary_serializer sink{self->system(), buf};
  if (auto err = sink(self->state.durable)) {
    throw std::runtime_error("cannot serialize the driver's state: " + describe_error(self, err));
  }
  return {buf.begin(), buf.end()};
}

/// Reads `driver.bin` into the driver, refusing one made by a graph of another shape.
static void restore_driver(driver self, const std::vector<uint8_t>& bytes) {
  durable_state snap;
  std::vector<char> buf(bytes.begin(), bytes.end());
  caf::binary_deserializer source{self->system(), buf};
  if (auto err = source(snap)) {
    throw std::runtime_error(
        "corrupt driver state (or one written by another version of milesrt): " +
        describe_error(self, err));
  }
  auto& st = self->state;
  const size_t sources = st.plan.sources.size();
  if (snap.sources.credit.size() != sources || snap.sources.out.size() != sources) {
    throw std::runtime_error("the checkpoint was made by a graph with " +
                             std::to_string(snap.sources.credit.size()) +
                             " sources, this one has " + std::to_string(sources));
  }
  if (snap.feed.buffer_actor != has_buffer(self)) {
    throw std::runtime_error(
        std::string("the checkpoint was made by a graph ") +
        (snap.feed.buffer_actor ? "with" : "without") + " a buffer actor, this one has " +
        (has_buffer(self) ? "one" : "none") + ": the learner's items would be lost");
  }
  const size_t aux = st.plan.aux_learners.size();
  if (snap.feed.aux_queue.size() != aux || snap.feed.aux_version.size() != aux) {
    throw std::runtime_error("the checkpoint was made by a graph with " +
                             std::to_string(snap.feed.aux_queue.size() + 1) +
                             " learners, this one has " + std::to_string(aux + 1));
  }
  st.durable = std::move(snap);
  // The stages start from their files, not from the restored version: none of them holds it
  // until the last publication, sent again once every actor has its state back, has arrived.
  st.flow.published = 0;
  st.recovery.restored_version = st.durable.version;
  st.flow.arrived_origins.clear();
}

namespace {

/// One checkpoint under way: its files, and the actors' snapshots still awaited.
struct checkpoint_round {
  std::shared_ptr<checkpoint_writer> writer;
  size_t waiting = 0, total = 0;
  bool failed = false;
  std::unique_ptr<progress_meter> meter;  // actors' snapshots written
};

/// Every snapshot is in: the driver's own state, then the commit.
void commit_checkpoint(driver self, const std::shared_ptr<checkpoint_round>& round) {
  auto& s = self->state;
  if (s.done || round->failed) return;
  try {
    round->writer->put_bytes("driver.bin", serialize_driver(self));
    round->writer->commit({{"step", std::to_string(s.durable.step)},
                           {"version", std::to_string(s.durable.version)},
                           {"graph", s.plan.graph_name}});
  } catch (const std::exception& e) {
    finish(self, false,
           std::string("checkpoint of step ") + std::to_string(s.durable.step) + ": " + e.what());
    return;
  }
  s.recovery.checkpointing = false;
  s.recovery.checkpoint_due = 0;
  after_progress(self);
}

/// Asks replica r of node i for its snapshot; a restartable replica that dies meanwhile is
/// replaced, and its replacement is asked instead.
void ask_snapshot(driver self, const std::shared_ptr<checkpoint_round>& round, size_t i,
                  uint32_t r) {
  auto& s = self->state;
  auto target = s.nodes[i].plan.replicas[r];
  const std::string key = s.nodes[i].plan.name + "-" + std::to_string(r);
  const std::string dir = round->writer->actor_dir(key).string();
  uint64_t ticket = open_ticket(
      self, i, r,
      [=] {
        if (self->state.nodes[i].plan.kind->restartable) {
          ask_snapshot(self, round, i, r);
          return;
        }
        finish(self, false,
               "actor '" + key + "' died while writing checkpoint step " +
                   std::to_string(self->state.durable.step));
      },
      "snapshot");
  self->request(target, s.nodes[i].plan.deadline, snapshot_atom::value, dir)
      .then(
          [=](actor_state& state) {
            if (self->state.done || round->failed || !close_ticket(self, i, r, ticket)) return;
            try {
              round->writer->put_bytes(key + ".state", state.bytes);
            } catch (const std::exception& e) {
              round->failed = true;
              finish(self, false, std::string("checkpoint: ") + e.what());
              return;
            }
            round->meter->update(round->total - --round->waiting);
            if (round->waiting == 0) {
              round->meter->finish();
              commit_checkpoint(self, round);
            }
          },
          [=](caf::error& err) {
            request_failed(
                self, i, r, ticket,
                "the driver, checkpointing step " + std::to_string(self->state.durable.step) + ",",
                "snapshot", err);
          });
}

/// Asks every actor for its state, writes the checkpoint and commits it. Runs only when nothing
/// is in flight, so that no item is lost or duplicated across a resume.
void checkpoint(driver self) {
  auto& st = self->state;
  auto round = std::make_shared<checkpoint_round>();
  round->writer = std::make_shared<checkpoint_writer>(st.plan.run_dir, st.durable.step);
  for (const auto& n : st.nodes) round->waiting += n.plan.replicas.size();
  round->total = round->waiting;
  round->meter = std::make_unique<progress_meter>(
      st.opts.progress, "checkpoint step " + std::to_string(st.durable.step), round->waiting);
  for (size_t i = 0; i < st.nodes.size(); ++i)
    for (uint32_t r = 0; r < st.nodes[i].plan.replicas.size(); ++r) ask_snapshot(self, round, i, r);
}

}  // namespace

void maybe_checkpoint_or_finish(driver self) {
  auto& st = self->state;
  if (st.done || st.recovery.checkpointing || !quiescent(self)) return;
  if (st.recovery.checkpoint_due != 0) {
    st.recovery.checkpointing = true;
    checkpoint(self);
    return;
  }
  if (st.durable.step >= st.plan.steps) {
    finish(self, true, "");
  } else if (st.durable.sources.exhausted && waiting_for_learner(self) < st.plan.batch_size) {
    st.note = sources_named(self) + " ran out of items after " + std::to_string(st.durable.step) +
              " of " + std::to_string(st.plan.steps) + " steps";
    finish(self, true, "");
  }
}

/// Restores the driver and every actor from a committed checkpoint, then starts.
void resume(driver self) {
  auto& st = self->state;
  st.recovery.resuming = true;
  std::shared_ptr<checkpoint_reader> reader;
  try {
    reader = std::make_shared<checkpoint_reader>(st.opts.resume_dir);
    restore_driver(self, reader->get_bytes("driver.bin"));
  } catch (const std::exception& e) {
    finish(self, false, std::string("cannot resume: ") + e.what());
    return;
  }
  auto waiting = std::make_shared<size_t>(0);
  for (const auto& n : st.nodes) *waiting += n.plan.replicas.size();
  // Restores replica r of node i; a restartable replica that dies meanwhile is replaced, and its
  // replacement gets the state instead.
  auto ask = std::make_shared<std::function<void(size_t, uint32_t, actor_state)>>();
  *ask = [=, weak = std::weak_ptr<std::function<void(size_t, uint32_t, actor_state)>>(ask)](
             size_t i, uint32_t r, actor_state state) {
    auto& s = self->state;
    auto target = s.nodes[i].plan.replicas[r];
    std::string key = s.nodes[i].plan.name + "-" + std::to_string(r);
    uint64_t ticket = open_ticket(
        self, i, r,
        [=] {
          auto again = weak.lock();
          if (self->state.nodes[i].plan.kind->restartable && again) {
            (*again)(i, r, state);
            return;
          }
          finish(self, false, "actor '" + key + "' died while restoring its state");
        },
        "restore");
    self->request(target, s.nodes[i].plan.deadline, restore_atom::value,
                  reader->actor_dir(key).string(), state)
        .then(
            [=](bool ok) {
              if (self->state.done || !close_ticket(self, i, r, ticket)) return;
              if (!ok) {
                finish(self, false,
                       "cannot resume: actor '" + key + "' refused its state from " +
                           reader->dir().string());
                return;
              }
              if (--*waiting != 0) return;
              auto& s = self->state;
              s.recovery.resuming = false;
              s.flow.admitted_at_step = s.durable.counters.admitted;
              // The stages start from their files: bring them to the restored version. Until
              // every hop of it has been applied, admission waits (admit(): restored_version).
              auto outs = s.durable.last_publication;
              if (!outs.empty()) route(self, s.plan.learner, outs, true);
              if (s.flow.live_publish == 0) s.flow.published = s.durable.version;
              after_progress(self);
            },
            [=](caf::error& err) {
              request_failed(self, i, r, ticket, "the driver, resuming,", "restore", err);
            });
  };
  std::vector<std::tuple<size_t, uint32_t, actor_state>> states;
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    for (uint32_t r = 0; r < st.nodes[i].plan.replicas.size(); ++r) {
      actor_state state;
      try {
        state.bytes = reader->get_bytes(st.nodes[i].plan.name + "-" + std::to_string(r) + ".state");
      } catch (const std::exception& e) {
        finish(self, false, std::string("cannot resume: ") + e.what());
        return;
      }
      states.emplace_back(i, r, std::move(state));
    }
  }
  st.recovery.resume_ask =
      ask;  // kept alive while the run lasts: a replica may die while restoring
  for (auto& [i, r, state] : states) (*ask)(i, r, state);
}

}  // namespace milesrt::runtime::driver_impl
