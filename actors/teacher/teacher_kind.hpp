#pragma once
/// The `teacher` actor kind (on-policy distillation): a frozen teacher model, local or remote
/// (teacher_source.hpp), that sets each sample's teacher_logprobs = log p_teacher(output token |
/// prompt + previous output) at the trainer's temperature, for the trainer's distillation term
/// (distillCoef). Apart from the `reference` kind (the KL anchor, ref_logprobs): a graph may have
/// both. It refuses to start when the teacher's tokenizer is not the student's.
/// Ports: `groups` (llm.scored_group, after a reward) and `samples` (llm.sample_group, straight
/// from the rollout: pure distillation, every reward 0) in; `groups` (llm.scored_group) out.
/// Params: TeacherParams (schemas/teacher.capnp).

#include "runtime/core/kind.hpp"

namespace milesrt::teacher {

/// Registers the kind "teacher" and the message types it carries.
void register_teacher_kind(runtime::kind_registry& registry);

}  // namespace milesrt::teacher
