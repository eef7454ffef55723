#include "app/builtin_kinds.hpp"

#include "actors/buffer/group_filter_kind.hpp"
#include "actors/buffer/trajectory_buffer_kind.hpp"
#include "actors/critic/critic_kind.hpp"
#include "actors/data/data_kind.hpp"
#include "actors/environment/environment_kind.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "actors/publisher/publisher_kind.hpp"
#include "actors/reference/reference_kind.hpp"
#include "actors/reward/reward_kinds.hpp"
#include "actors/rollout/rollout_kind.hpp"
#include "actors/session_server/session_server_kind.hpp"
#include "actors/teacher/teacher_kind.hpp"
#include "actors/trainer/trainer_kind.hpp"

namespace milesrt::app {

void register_builtin_kinds(runtime::kind_registry& kinds,
                            std::shared_ptr<const rl::registries> losses,
                            std::shared_ptr<const buffer::policy_registry> buffer_policies,
                            std::shared_ptr<const environment::environment_registry> environments) {
  data::register_data_kind(kinds);
  rollout::register_rollout_kind(kinds);
  reward::register_reward_kinds(kinds);
  buffer::register_group_filter_kind(kinds);
  buffer::register_trajectory_buffer_kind(kinds, std::move(buffer_policies));
  trainer::register_trainer_kind(kinds, std::move(losses));
  publisher::register_publisher_kind(kinds);
  reference::register_reference_kind(kinds);
  teacher::register_teacher_kind(kinds);
  critic::register_critic_kind(kinds);
  session_server::register_session_server_kind(kinds);
  environment::register_environment_kind(kinds, std::move(environments));
}

}  // namespace milesrt::app
