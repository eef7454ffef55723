#include "app/schema_renames.hpp"

namespace milesrt::app {

const std::vector<graph::renamed_field>& schema_renames() {
  static const std::vector<graph::renamed_field> table = {
      // One name per idea: the names the rollout and the trainer (and Miles/slime) use.
      {"EnvironmentParams", "groupSize", "samplesPerPrompt", ""},
      {"EnvironmentParams", "evalEvery", "evalInterval", ""},
      // The async schedule's name for the same choice.
      {"TrajectoryBufferParams", "whenStale", "onStale", ""},
      // Counts between two events are ...Interval.
      {"PublisherParams", "fullEvery", "fullCopyInterval", ""},
      // A second name for an estimator.
      {"TrainerParams", "stdNormalize", "",
       "for stdNormalize = false write estimator = \"dr_grpo\" (GRPO without the division by the "
       "group's standard deviation); stdNormalize = true was the default: delete it"},
  };
  return table;
}

}  // namespace milesrt::app
