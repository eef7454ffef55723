#pragma once
/// The CPU backend: libtorch's c10d ProcessGroupGloo (Gloo as compiled into libtorch_cpu.so),
/// with rendezvous through a c10d TCP store. Gloo's headers come from Debian's libgloo-dev; the
/// layout test (gloo_layout.test.cpp) shows they agree with the Gloo inside the wheel on
/// everything this file relies on.

#include <caf/expected.hpp>
#include <memory>

#include "actors/lib/dist/collectives.hpp"

namespace milesrt::dist {

/// Meets the other ranks (rendezvous()) and forms a Gloo group over CPU tensors. Fails with an
/// error naming the missing ranks, an unreachable rank 0 or a port in use.
caf::expected<std::unique_ptr<collectives>> make_gloo_collectives(const group_options& o);

}  // namespace milesrt::dist
