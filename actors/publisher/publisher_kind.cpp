#include "actors/publisher/publisher_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <chrono>
#include <cstdio>

#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/lib/weights/nccl_broadcast.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "actors/lib/weights/transport.hpp"
#include "milesrt/publisher.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::publisher {
using namespace milesrt::weights;  // the publish protocol and its transports
namespace {
using namespace milesrt::runtime;
namespace fs = std::filesystem;
using Transport = schema::PublisherParams::Transport;

/// Sent to itself after answering: the part of a publish that waits for the engines (NCCL
/// collectives), which they join once they get the update.
using ncclgo_atom = caf::atom_constant<caf::atom("ncclgo")>;

using publisher_actor =
    stage_actor::extend<caf::replies_to<fullcopy_atom, uint64_t>::with<std::string>,
                        caf::reacts_to<ncclgo_atom>>;

struct publisher_state {
  std::string name;
  Transport kind = Transport::COLOCATED;
  bool verify = true;
  bool copies = false;  ///< handover = copy: publish the immutable copy of each version
  std::shared_ptr<local_versions> versions;  ///< this process's trainers and their copies
  transport_options options;
  std::unique_ptr<transport> out;  ///< made on the first version (ipc picks by its device)
  bool warned_share = false;
};

/// The weights of the version `ref` announces, as the handover says, or an error naming why
/// there are none.
caf::expected<published_version> find_version(publisher_state& st, const weights_ref& ref) {
  auto live = st.versions->live(ref.channel);
  if (!live) {
    return caf::make_error(caf::sec::runtime_error,
                           "publisher '" + st.name + "': no trainer '" + ref.channel +
                               "' in this process (place the publisher with the trainer)");
  }
  published_version v;
  v.version = ref.version;
  if (st.copies) {
    v.weights = st.versions->frozen(ref.channel, ref.version);
    v.frozen = true;
    if (!v.weights) {
      return caf::make_error(caf::sec::runtime_error,
                             "publisher '" + st.name + "': trainer '" + ref.channel +
                                 "' has no copy of version " + std::to_string(ref.version) +
                                 " (it keeps " + st.versions->kept_range(ref.channel) +
                                 "; handover = copy needs a trainer that announces its versions to "
                                 "the weights library)");
    }
    return v;
  }
  v.weights = std::move(live);
  const uint64_t latest = st.versions->latest(ref.channel);
  if (latest > ref.version && !st.warned_share) {
    // The trainer went on training before this version was published: the engines would read
    // weights that change under them (an async schedule with handover = share).
    st.warned_share = true;
    log::warn(
        log::at{st.name, {}},
        "trainer '{}' is at version {} while version {} is published; with handover = share the "
        "engines read weights that training changes (an async schedule needs publisher.handover = "
        "copy)",
        ref.channel, latest, ref.version);
  }
  return v;
}

publisher_actor::behavior_type publisher_fn(publisher_actor::stateful_pointer<publisher_state> self,
                                            std::shared_ptr<publisher_state> init) {
  self->state = std::move(*init);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto& st = self->state;
        if (port != "weights" || !e.payload.match_elements<weights_ref>()) {
          return caf::make_error(
              caf::sec::unexpected_message,
              "publisher '" + st.name + "': port '" + port + "' expects a weights_ref");
        }
        const auto& ref = e.payload.get_as<weights_ref>(0);
        auto v = find_version(st, ref);
        if (!v) return std::move(v.error());
        const timer t;
        weights_update u;
        u.version = ref.version;
        u.channel = ref.channel;
        u.pid = static_cast<int64_t>(::getpid());
        u.publisher = caf::actor_cast<caf::actor>(self);
        const auto& buffer = v->weights->buffer();
        try {
          at::NoGradGuard no_grad;
          if (!st.out) st.out = make_transport(st.kind, buffer.device(), st.options);
          u.transport = st.out->name();
          const bool after_reply = st.out->publish(*v, u);
          if (st.verify && !u.share) u.hashes = param_hashes(*v->weights);
          if (after_reply)
            self->send(self, ncclgo_atom::value);  // handled after this answer went out
        } catch (const std::exception& ex) {
          return runtime::to_error(
              ex, "publisher '" + st.name + "', version " + std::to_string(ref.version));
        }
        node_reply reply;
        reply.metrics["publish_seconds"] = t.seconds();
        reply.metrics["publish_bytes"] =
            static_cast<double>(buffer.numel() * buffer.element_size());
        envelope out;
        out.min_version = out.max_version = ref.version;
        out.payload = caf::make_message(std::move(u));
        reply.outputs.push_back({"updates", std::move(out)});
        return reply;
      },
      [=](fullcopy_atom, uint64_t version) -> caf::result<std::string> {
        auto& st = self->state;
        try {
          if (!st.out) throw full_copy_refused("has published nothing on disk");
          return st.out->full_copy(version);
        } catch (const full_copy_refused& ex) {
          return caf::make_error(caf::sec::runtime_error,
                                 "publisher '" + st.name + "' " + ex.what());
        } catch (const std::exception& ex) {
          return caf::make_error(caf::sec::runtime_error,
                                 "publisher '" + st.name + "': " + ex.what());
        }
      },
      [=](ncclgo_atom) {
        auto& st = self->state;
        try {
          st.out->after_reply();
        } catch (const std::exception& ex) {
          // Nobody waits on this message: the engines' requests meet their deadlines, and this
          // line says why.
          log::error(log::at{st.name, {}}, "{}: {}", st.out->name(), ex.what());
          self->quit(caf::make_error(caf::sec::runtime_error, ex.what()));
        }
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

problem_list check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::PublisherParams>();
  problem_list problems;
  auto t = p.getTransport();
  if (t == schema::PublisherParams::Transport::BROADCAST ||
      t == schema::PublisherParams::Transport::P2P) {
#ifndef MILESRT_HAVE_NCCL
    problems.push_back({"transport", transport_name(t) + " needs a build with CUDA and NCCL"});
#endif
    if (p.getEngines() == 0)
      problems.push_back({"engines", "must be at least 1 for " + transport_name(t)});
    if (p.getBucketMb() == 0) problems.push_back({"bucketMb", "must be at least 1"});
  }
  if (p.getKeepVersions() == 0) problems.push_back({"keepVersions", "must be at least 1"});
  return problems;
}

std::string process_of(const std::string& placement) {
  return placement.empty() ? "the driver's process" : "worker '" + placement + "'";
}

// Colocated publishing hands the trainer's buffer to the engine inside one process: the trainers
// that feed this publisher and the engines it feeds must share its placement.
problem_list check_placements(capnp::DynamicStruct::Reader reader, const actor_in_graph& g) {
  problem_list problems;
  if (reader.as<schema::PublisherParams>().getTransport() !=
      schema::PublisherParams::Transport::COLOCATED)
    return problems;
  auto check = [&](const graph_neighbour& n) {
    if (n.placement == g.placement) return;
    problems.push_back(
        {"transport", "colocated hands the weights over inside one process, but actor '" + n.name +
                          "' (" + n.kind + ") is placed on " + process_of(n.placement) +
                          " and the publisher on " + process_of(g.placement) +
                          " (place them together, or publish across processes with ipc, diskDelta "
                          "or broadcast)"});
  };
  for (const auto& n : g.upstream) check(n);
  for (const auto& n : g.downstream) check(n);
  return problems;
}

}  // namespace

void register_publisher_kind(kind_registry& registry) {
  kind_descriptor k;
  k.name = "publisher";
  k.summary =
      "moves each trained version to the rollout engines (colocated, ipc, disk_delta, broadcast, "
      "p2p)";
  k.role = role::stage;
  k.inputs = {{"weights", weights::port_type::trained_weights, "a new version from the trainer"}};
  k.outputs = {{"updates", weights::port_type::weights, "what each engine applies"}};
  k.params_member = "publisher";
  k.check_params = check;
  k.check_in_graph = check_placements;
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::PublisherParams>();
    for (const auto& problem : check(*s.params_struct))
      throw std::invalid_argument(within("params.publisher", problem).text());
    auto init = std::make_shared<publisher_state>();
    init->name = s.name;
    init->kind = p.getTransport();
    init->verify = p.getVerify();
    init->copies = p.getHandover() == schema::PublisherParams::Handover::COPY;
    init->versions = s.store->get_or_make<local_versions>();
    // Before any step runs (every actor is spawned first): from now on this process's trainers
    // freeze a copy of each version they announce.
    if (init->copies) init->versions->keep_copies(p.getKeepVersions());
    auto& o = init->options;
    o.publisher = s.name;
    o.full_every = p.getFullCopyInterval();
    o.keep_versions = p.getKeepVersions();
    o.engines = p.getEngines();
    o.bucket_bytes = static_cast<int64_t>(p.getBucketMb()) << 20;
    o.dir = p.getDir().size() ? fs::path(std::string(p.getDir())) : s.run_dir / "weights";
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(publisher_fn, init));
  };
  registry.add(k);
  registry.add_types([](caf::actor_system_config& cfg) {
    cfg.add_message_types<caf::id_block::milesrt_weights>();
  });
}

}  // namespace milesrt::publisher
