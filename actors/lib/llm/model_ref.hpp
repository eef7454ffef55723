#pragma once
/// The model a kind names: `model`, `device`, `dtype` and `chatTemplate` are the same fields, with
/// the same meaning, in every kind's params that has them (rollout, trainer, reference, critic,
/// environment, session_server); model_ref reads them from any of those structs and
/// model_ref_problems is the one check of them.

#include <capnp/dynamic.h>

#include <string>
#include <vector>

#include "actors/lib/llm/config.hpp"
#include "milesrt/device.capnp.h"
#include "runtime/core/problem.hpp"

namespace milesrt::llm {

struct model_ref {
  std::string model;  ///< a Hugging Face model folder
  schema::Device device = schema::Device::CPU;
  schema::Dtype dtype = schema::Dtype::FP32;
  std::string chat_template;  ///< a Jinja chat template file; "": the model's own
};

/// The four fields of a kind's params struct; a field the struct lacks keeps its default.
model_ref model_ref_of(capnp::DynamicStruct::Reader params);

/// What a kind reads of the model folder.
enum class model_use {
  weights,  ///< the model itself: config.json and safetensors (rollout, trainer, reference, critic)
  tokenizer,  ///< the rollout's tokenizer.json only (environment, session_server)
};

/// What is wrong, each problem naming its field: the model is required; its folder has what `use`
/// needs (llm::model_folder_problem for the weights); the chat template, when named, is a file. The
/// files are looked at only while runtime::named_files_read(). `config`, when given, receives the
/// model's config when the weights' folder was read and found sound (`*read` says whether).
problem_list model_ref_problems(const model_ref& m, model_use use, model_config* config = nullptr,
                                bool* read = nullptr);

}  // namespace milesrt::llm
