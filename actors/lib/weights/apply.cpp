#include "actors/lib/weights/apply.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

receiver::receiver() = default;
receiver::~receiver() = default;
receiver::receiver(receiver&&) noexcept = default;
receiver& receiver::operator=(receiver&&) noexcept = default;

void receiver::apply(llm::decoder& model, const weights_update& u, local_versions& local) {
  at::NoGradGuard no_grad;
  if (u.version < version_) {
    throw std::runtime_error("version " + std::to_string(u.version) + " is older than the " +
                             std::to_string(version_) + " the engine holds");
  }
  if (!transport_ || !transport_->serves(u)) transport_ = make_transport(u);
  apply_context ctx;
  ctx.local = &local;
  ctx.have = version_;
  ctx.rank = rank_;
  const apply_result r = transport_->apply(model, u, ctx);
  if (r.full_copy) full_copies_++;
  if (r.verifiable && !u.hashes.empty()) verify_weights(model.published(), u.hashes);
  // No rebuild of the views here: copies go into the buffer in place, and a shared buffer's views
  // belong to the trainer (views made under no-grad would stop its gradients).
  version_ = u.version;
}

}  // namespace milesrt::weights
