#include "actors/lib/llm/model_ref.hpp"

#include <filesystem>

#include "actors/lib/llm/model_folder.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace fs = std::filesystem;

model_ref model_ref_of(capnp::DynamicStruct::Reader params) {
  model_ref m;
  auto s = params.getSchema();
  auto field = [&](const char* name) { return s.findFieldByName(name); };
  auto model = field("model"), chat = field("chatTemplate"), device = field("device"),
       dtype = field("dtype");
  KJ_IF_MAYBE (f, model) {
    m.model = params.get(*f).as<capnp::Text>().cStr();
  }
  KJ_IF_MAYBE (f, chat) {
    m.chat_template = params.get(*f).as<capnp::Text>().cStr();
  }
  KJ_IF_MAYBE (f, device) {
    m.device = params.get(*f).as<capnp::DynamicEnum>().as<schema::Device>();
  }
  KJ_IF_MAYBE (f, dtype) {
    m.dtype = params.get(*f).as<capnp::DynamicEnum>().as<schema::Dtype>();
  }
  return m;
}

problem_list model_ref_problems(const model_ref& m, model_use use, model_config* config,
                                bool* read) {
  problem_list problems;
  if (read != nullptr) *read = false;
  if (m.model.empty()) {
    problems.push_back({"model", use == model_use::weights
                                     ? "required (a Hugging Face model folder)"
                                     : "required (the rollout's model folder, for its tokenizer)"});
  } else if (runtime::named_files_read()) {
    if (use == model_use::weights) {
      if (auto e = model_folder_problem(m.model, config); !e.empty()) {
        problems.push_back({"model", e});
      } else if (read != nullptr) {
        *read = true;
      }
    } else if (!fs::is_regular_file(fs::path(m.model) / "tokenizer.json")) {
      problems.push_back({"model", "'" + m.model + "' has no tokenizer.json"});
    }
  }
  // The template compiles when the actor starts (errors then name its line); here only the file.
  if (!m.chat_template.empty() && runtime::named_files_read() &&
      !fs::is_regular_file(m.chat_template)) {
    problems.push_back({"chatTemplate",
                        "'" + m.chat_template + "' is not a file (a Jinja chat template, .jinja)"});
  }
  return problems;
}

}  // namespace milesrt::llm
