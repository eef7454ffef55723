#include "actors/lib/weights/apply.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <caf/all.hpp>

#include "actors/lib/weights/cuda_ipc.hpp"
#include "actors/lib/weights/disk_delta.hpp"
#include "actors/lib/weights/ipc.hpp"
#include "actors/lib/weights/nccl_broadcast.hpp"
#include "actors/lib/weights/transfer_plan.hpp"
#include "actors/lib/weights/tensor_hash.hpp"

namespace milesrt::weights {


#ifndef MILESRT_PUBLISHER_HAVE_CUDA_IPC
class cuda_ipc_receiver {};
#endif
#ifndef MILESRT_PUBLISHER_HAVE_NCCL
class nccl_broadcaster {};
#endif

receiver::receiver() = default;
receiver::~receiver() = default;
receiver::receiver(receiver&&) noexcept = default;
receiver& receiver::operator=(receiver&&) noexcept = default;

void receiver::apply(llm::decoder& model, const weights_update& u, runtime::process_store& store) {
  at::NoGradGuard no_grad;
  if (u.version < version_) {
    throw std::runtime_error("version " + std::to_string(u.version) + " is older than the " +
                             std::to_string(version_) + " the engine holds");
  }
  bool verify = !u.hashes.empty();
  if (u.transport == "colocated") {
    auto src = store.get<llm::flat_params>("weights/" + u.channel);
    if (!src) {
      throw std::runtime_error("no trainer '" + u.channel + "' in this process: colocated publishing needs "
                               "the trainer and the engine in one process (the same placement)");
    }
    if (u.share && src->buffer().scalar_type() == model.dtype() && src->buffer().device() == model.device()) {
      // Sync schedule: the engine reads the trainer's own weights; nothing is copied.
      if (model.shared_params() != src) model.set_params(src);
      verify = false;
    } else if (!u.share && u.channel.find('@') != std::string::npos &&
               src->buffer().scalar_type() == model.dtype() && src->buffer().device() == model.device()) {
      // Async: the trainer made one flat copy of this version that nothing changes; the engine
      // adopts it as its own buffer.
      model.set_params(src);
    } else {
      // Another dtype or device: one flat copy (with conversion) into the engine's own buffer.
      if (model.shared_params() == src) model.set_params(src->copy(model.dtype(), model.device()));
      else model.mutable_params().buffer().detach().copy_(src->buffer().detach());
      if (src->buffer().scalar_type() != model.dtype()) verify = false;  // hashes are of the trainer's dtype
    }
  } else if (u.transport == "disk_delta") {
    if (!delta_) delta_ = std::make_unique<delta_reader>();
    try {
      delta_->apply(model.mutable_params(), u.location, version_, u.version);
    } catch (const delta_error& e) {
      // Refused (corrupt or missing): ask the publisher for a full copy of this version.
      if (!u.publisher) throw;
      caf::scoped_actor self{u.publisher->home_system()};
      std::string error;
      self->request(u.publisher, std::chrono::seconds(120), fullcopy_atom::value, u.version)
          .receive([](const std::string&) {},
                   [&](caf::error& err) { error = self->system().render(err); });
      if (!error.empty()) {
        throw std::runtime_error(std::string(e.what()) + "; the full copy could not be had: " + error);
      }
      delta_->apply_full(model.mutable_params(), u.location, u.version);
      full_copies_++;
    }
  } else if (u.transport == "ipc" && u.location.rfind("cuda-ipc:", 0) == 0) {
#ifdef MILESRT_PUBLISHER_HAVE_CUDA_IPC
    if (!cuda_ipc_) cuda_ipc_ = std::make_unique<cuda_ipc_receiver>();
    cuda_ipc_->apply(model.mutable_params(), u.location);
#else
    throw std::runtime_error("a CUDA IPC update reached an engine built without CUDA");
#endif
  } else if (u.transport == "ipc") {
    shm_receiver shm(u.location);
    // The segment holds the newest version; in the async schedule that may already be a later
    // one than this update's, whose hashes then do not apply (it is verified by its checksum).
    if (shm.apply(model.mutable_params(), u.version, std::chrono::seconds(60)) != u.version) verify = false;
  } else if (u.transport == "broadcast" || u.transport == "p2p") {
#ifdef MILESRT_PUBLISHER_HAVE_NCCL
    // location: "nccl:<world>:<bucket bytes>:<hex id>"
    std::vector<std::string> f;
    size_t from = 0;
    for (size_t at; (at = u.location.find(':', from)) != std::string::npos; from = at + 1) {
      f.push_back(u.location.substr(from, at - from));
    }
    f.push_back(u.location.substr(from));
    if (f.size() != 4 || f[0] != "nccl") throw std::runtime_error("'" + u.location + "' is not an NCCL location");
    const int world = std::stoi(f[1]);
    const int64_t bucket = std::stoll(f[2]);
    auto& p = model.mutable_params();
    if (rank_ < 1 || rank_ >= world) {
      throw std::runtime_error("this engine is rank " + std::to_string(rank_) + " but the publisher set up " +
                               std::to_string(world - 1) + " engine ranks (publisher.engines)");
    }
    if (!nccl_) nccl_ = std::make_unique<nccl_broadcaster>(nccl_id_from_hex(f[3]), world, rank_, p.buffer().device().index());
    if (u.transport == "broadcast") {
      nccl_->broadcast(p, 0, bucket);
    } else {
      if (plan_.empty()) plan_ = plan_whole_model(p.element_counts(), world - 1);
      nccl_->run_plan(p, plan_);
    }
#else
    throw std::runtime_error("transport '" + u.transport + "' needs a build with CUDA and NCCL");
#endif
  } else {
    throw std::runtime_error("transport '" + u.transport + "' cannot be applied by this engine");
  }
  if (verify) verify_weights(model.params(), u.hashes);
  // No rebuild of the views here: copies go into the buffer in place, and a shared buffer's views
  // belong to the trainer (views made under no-grad would stop its gradients).
  version_ = u.version;
}

}  // namespace milesrt::weights
