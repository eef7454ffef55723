#include "actors/lib/weights/colocated.hpp"

#include <ATen/ATen.h>

#include "actors/lib/weights/local_versions.hpp"

namespace milesrt::weights {

bool colocated_transport::publish(const published_version& v, weights_update& u) {
  // Nothing moves: the engine finds the weights in local_versions, by trainer and version.
  u.share = !v.frozen;
  return false;
}

apply_result colocated_transport::apply(llm::decoder& model, const weights_update& u,
                                        const apply_context& ctx) {
  auto live = ctx.local ? ctx.local->live(u.channel) : nullptr;
  if (!live) {
    throw std::runtime_error("no trainer '" + u.channel +
                             "' in this process: colocated publishing needs "
                             "the trainer and the engine in one process (the same placement)");
  }
  std::shared_ptr<llm::flat_params> src = live;
  bool adopt = u.share;  // share: the trainer's own buffer
  if (!u.share) {
    if (auto copy = ctx.local->frozen(u.channel, u.version)) {
      src = std::move(copy);  // handover = copy: an immutable copy of this version
      adopt = true;
    } else if (ctx.local->copies_kept() > 0) {
      throw std::runtime_error("trainer '" + u.channel + "' no longer has a copy of version " +
                               std::to_string(u.version) + " in this process (it keeps " +
                               ctx.local->kept_range(u.channel) +
                               "; raise publisher.keepVersions)");
    }
    // No copies are kept at all: copy from the trainer's buffer into the engine's own below.
  }
  apply_result r;
  const auto& b = src->buffer();
  if (adopt && b.scalar_type() == model.dtype() && b.device() == model.device()) {
    if (model.shared_published() != src) model.set_published(src);
    borrowed_ = true;
    if (u.share) r.verifiable = false;  // nothing was copied (and no hashes were sent)
    return r;
  }
  // Another dtype or device, or nothing to adopt: one flat copy (with conversion) into the
  // engine's own buffer, never into a buffer it borrowed.
  if (borrowed_ || model.shared_published() == src) {
    model.set_published(src->copy(model.dtype(), model.device()));
    borrowed_ = false;
  } else {
    model.mutable_published().buffer().detach().copy_(b.detach());
  }
  if (b.scalar_type() != model.dtype())
    r.verifiable = false;  // the hashes are of the trainer's dtype
  return r;
}

}  // namespace milesrt::weights
