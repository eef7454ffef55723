#pragma once
/// `freshest`: a trajectory-buffer policy the built-ins lack. It serves the groups made by the
/// newest model version first (the most on-policy data; ties: the newest arrival first), and
/// discards what lags the learner by more than maxStaleness whatever onStale says: in an async
/// run the learner always trains on the freshest groups the buffer holds, and old ones never
/// linger.

#include <memory>

#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::examples {

std::unique_ptr<buffer::buffer_policy> make_freshest_policy();

}  // namespace milesrt::examples
