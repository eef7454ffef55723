#include "actors/publisher/publisher_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <chrono>
#include <cstdio>

#include "actors/lib/weights/cuda_ipc.hpp"
#include "actors/lib/weights/disk_delta.hpp"
#include "actors/lib/weights/ipc.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/lib/weights/nccl_broadcast.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "milesrt/publisher.capnp.h"
#include "runtime/core/interfaces.hpp"

namespace milesrt::publisher {
using namespace milesrt::weights;  // the publish protocol and its transports
namespace {
using namespace milesrt::runtime;
namespace fs = std::filesystem;

/// Sent to itself after answering: the NCCL side of a broadcast / p2p publish, which blocks until
/// every engine takes part (they do once they get the update).
using ncclgo_atom = caf::atom_constant<caf::atom("ncclgo")>;

using publisher_actor = stage_actor::extend<caf::replies_to<fullcopy_atom, uint64_t>::with<std::string>,
                                            caf::reacts_to<ncclgo_atom>>;

struct publisher_state {
  std::string name;
  std::string transport;
  bool verify = true;
  bool async = false;
  std::shared_ptr<process_store> store;
  fs::path dir;
  uint32_t full_every = 0;
  std::unique_ptr<delta_writer> writer;
  std::unique_ptr<shm_publisher> shm;
  uint32_t engines = 1;         ///< broadcast / p2p: engine ranks (1..engines; the trainer is rank 0)
  int64_t bucket_bytes = 256 << 20;
#ifdef MILESRT_PUBLISHER_HAVE_NCCL
  std::string nccl_location;    ///< "nccl:<world>:<bucket bytes>:<hex id>", made on the first publish
  nccl_id id{};
  std::unique_ptr<nccl_broadcaster> nccl;
  std::shared_ptr<llm::flat_params> nccl_src;  ///< the version the next ncclgo sends
  std::vector<transfer> plan;   ///< p2p: computed once
#endif
#ifdef MILESRT_PUBLISHER_HAVE_CUDA_IPC
  std::unique_ptr<cuda_ipc_publisher> cuda_ipc;  ///< ipc of weights on a GPU
#endif
  /// disk_delta: CPU copies of the last versions published, for full copies an engine asks for
  /// after the trainer has moved on.
  std::map<uint64_t, std::shared_ptr<llm::flat_params>> held;
};

std::string transport_name(schema::PublisherParams::Transport t) {
  switch (t) {
    case schema::PublisherParams::Transport::COLOCATED: return "colocated";
    case schema::PublisherParams::Transport::IPC: return "ipc";
    case schema::PublisherParams::Transport::BROADCAST: return "broadcast";
    case schema::PublisherParams::Transport::P2P: return "p2p";
    case schema::PublisherParams::Transport::DISK_DELTA: return "disk_delta";
  }
  return "?";
}

publisher_actor::behavior_type publisher_fn(publisher_actor::stateful_pointer<publisher_state> self,
                                            std::shared_ptr<publisher_state> init) {
  self->state = std::move(*init);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto& st = self->state;
        if (port != "weights" || !e.payload.match_elements<weights_ref>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 "publisher '" + st.name + "': port '" + port + "' expects a weights_ref");
        }
        const auto& ref = e.payload.get_as<weights_ref>(0);
        auto src = st.store->get<llm::flat_params>("weights/" + ref.channel);
        if (!src) {
          return caf::make_error(caf::sec::runtime_error,
                                 "publisher '" + st.name + "': no trainer '" + ref.channel +
                                     "' in this process (place the publisher with the trainer)");
        }
        const auto t0 = std::chrono::steady_clock::now();
        weights_update u;
        u.version = ref.version;
        u.transport = st.transport;
        u.channel = ref.channel;
        u.pid = static_cast<int64_t>(::getpid());
        u.publisher = caf::actor_cast<caf::actor>(self);
        node_reply reply;
        try {
          at::NoGradGuard no_grad;
          const bool share = st.transport == "colocated" && !st.async;
          if (st.verify && !share) u.hashes = param_hashes(*src);
          if (st.transport == "colocated") {
            u.share = share;
          } else if (st.transport == "disk_delta") {
            if (!st.writer) st.writer = std::make_unique<delta_writer>(st.dir, st.full_every);
            st.writer->publish(*src, ref.version);
            u.location = st.dir.string();
            st.held[ref.version] = src->copy(src->buffer().scalar_type(), at::Device(at::kCPU));
            while (st.held.size() > 2) st.held.erase(st.held.begin());
          } else if (st.transport == "ipc" && src->buffer().is_cuda()) {
#ifdef MILESRT_PUBLISHER_HAVE_CUDA_IPC
            if (!st.cuda_ipc) {
              st.cuda_ipc = std::make_unique<cuda_ipc_publisher>(
                  src->buffer().numel() * src->buffer().element_size(), src->buffer().device().index());
            }
            u.location = st.cuda_ipc->publish(*src);
#else
            throw std::runtime_error("ipc of weights on a GPU needs a build with CUDA");
#endif
          } else if (st.transport == "ipc") {
            const size_t bytes = src->buffer().numel() * src->buffer().element_size();
            if (!st.shm) {
              u.location = "/milesrt-" + std::to_string(::getpid()) + "-" + st.name;
              st.shm = std::make_unique<shm_publisher>(u.location, bytes);
            }
            u.location = "/milesrt-" + std::to_string(::getpid()) + "-" + st.name;
            st.shm->publish(*src, ref.version);
          } else {
#ifdef MILESRT_PUBLISHER_HAVE_NCCL
            if (!src->buffer().is_cuda()) {
              throw std::runtime_error("transport '" + st.transport + "' moves weights between GPUs; the trainer's are on " +
                                       src->buffer().device().str());
            }
            if (st.nccl_location.empty()) {
              st.id = nccl_broadcaster::make_id();
              st.nccl_location = "nccl:" + std::to_string(st.engines + 1) + ":" + std::to_string(st.bucket_bytes) +
                                 ":" + nccl_id_to_hex(st.id);
            }
            u.location = st.nccl_location;
            st.nccl_src = src;
            self->send(self, ncclgo_atom::value);  // after this answer has gone out
#else
            throw std::runtime_error("transport '" + st.transport + "' needs a build with CUDA and NCCL");
#endif
          }
        } catch (const std::exception& ex) {
          return caf::make_error(caf::sec::runtime_error, "publisher '" + st.name + "', version " +
                                                              std::to_string(ref.version) + ": " + ex.what());
        }
        reply.metrics["publish_seconds"] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        reply.metrics["publish_bytes"] = static_cast<double>(src->buffer().numel() * src->buffer().element_size());
        envelope out;
        out.min_version = out.max_version = ref.version;
        out.payload = caf::make_message(std::move(u));
        reply.outputs.push_back({"updates", std::move(out)});
        return reply;
      },
      [=](fullcopy_atom, uint64_t version) -> caf::result<std::string> {
        auto& st = self->state;
        if (!st.writer || st.held.empty()) {
          return caf::make_error(caf::sec::runtime_error, "publisher '" + st.name + "' has published nothing on disk");
        }
        auto it = st.held.find(version);
        if (it == st.held.end()) {
          return caf::make_error(caf::sec::runtime_error,
                                 "publisher '" + st.name + "' no longer holds version " + std::to_string(version) +
                                     " (it holds " + std::to_string(st.held.begin()->first) + ".." +
                                     std::to_string(st.held.rbegin()->first) + ")");
        }
        try {
          return st.writer->write_full(*it->second, version).string();
        } catch (const std::exception& ex) {
          return caf::make_error(caf::sec::runtime_error, "publisher '" + st.name + "': " + ex.what());
        }
      },
      [=](ncclgo_atom) {
#ifdef MILESRT_PUBLISHER_HAVE_NCCL
        auto& st = self->state;
        try {
          auto src = st.nccl_src;
          if (!st.nccl) {
            st.nccl = std::make_unique<nccl_broadcaster>(st.id, static_cast<int>(st.engines) + 1, 0,
                                                         src->buffer().device().index());
          }
          if (st.transport == "broadcast") {
            st.nccl->broadcast(*src, 0, st.bucket_bytes);
          } else {
            if (st.plan.empty()) st.plan = plan_whole_model(src->element_counts(), static_cast<int>(st.engines));
            st.nccl->run_plan(*src, st.plan);
          }
        } catch (const std::exception& ex) {
          // Nobody waits on this message: the engines' requests meet their deadlines, and this
          // line says why.
          std::fprintf(stderr, "publisher '%s': %s: %s\n", st.name.c_str(), st.transport.c_str(), ex.what());
          self->quit(caf::make_error(caf::sec::runtime_error, ex.what()));
        }
#endif
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

std::vector<std::string> check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::PublisherParams>();
  std::vector<std::string> problems;
  auto t = p.getTransport();
  if (t == schema::PublisherParams::Transport::BROADCAST || t == schema::PublisherParams::Transport::P2P) {
#ifndef MILESRT_PUBLISHER_HAVE_NCCL
    problems.push_back("transport: " + transport_name(t) + " needs a build with CUDA and NCCL");
#endif
    if (p.getEngines() == 0) problems.push_back("engines: must be at least 1 for " + transport_name(t));
    if (p.getBucketMb() == 0) problems.push_back("bucketMb: must be at least 1");
  }
  return problems;
}

}  // namespace

void register_publisher_kind(kind_registry& registry) {
  kind_descriptor k;
  k.name = "publisher";
  k.summary = "moves each trained version to the rollout engines (colocated, ipc, disk_delta, broadcast, p2p)";
  k.role = role::stage;
  k.inputs = {{"weights", weights::port_type::trained_weights, "a new version from the trainer"}};
  k.outputs = {{"updates", weights::port_type::weights, "what each engine applies"}};
  k.params_member = "publisher";
  k.check_params = check;
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::PublisherParams>();
    for (const auto& problem : check(*s.params_struct)) throw std::invalid_argument("params.publisher." + problem);
    auto init = std::make_shared<publisher_state>();
    init->name = s.name;
    init->transport = transport_name(p.getTransport());
    init->verify = p.getVerify();
    init->async = s.async_schedule;
    init->store = s.store;
    init->full_every = p.getFullEvery();
    init->engines = p.getEngines();
    init->bucket_bytes = static_cast<int64_t>(p.getBucketMb()) << 20;
    init->dir = p.getDir().size() ? fs::path(std::string(p.getDir())) : s.run_dir / "weights";
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(publisher_fn, init));
  };
  registry.add(k);
  registry.add_types([](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_weights>(); });
}

}  // namespace milesrt::publisher
