#pragma once
/// The colocated transport: trainer and engine in one process. With handover = share the engine
/// uses the trainer's own buffer (nothing copied); with handover = copy it adopts the immutable
/// copy of the version that local_versions holds. Where the engine's dtype or device differ, it
/// converts into a buffer of its own.

#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

class colocated_transport final : public transport {
 public:
  const char* name() const override { return "colocated"; }
  bool publish(const published_version& v, weights_update& u) override;
  apply_result apply(llm::decoder& model, const weights_update& u,
                     const apply_context& ctx) override;

 private:
  bool borrowed_ = false;  ///< the engine's buffer is the trainer's or a kept copy, not its own
};

}  // namespace milesrt::weights
