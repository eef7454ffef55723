#include "actors/trainer/trainer_export.hpp"

#include <sstream>
#include <string>

#include "actors/lib/llm/peft_io.hpp"

namespace milesrt::trainer {
namespace fs = std::filesystem;

void export_model(const trainer_state& st, const fs::path& dir) {
  const auto& model = st.core->model();
  if (const auto* lora = model.lora()) {
    // The adapters alone in peft's format, in a folder of their own: a model folder holding an
    // adapter_config.json would be read by transformers as base + adapter (applied twice).
    llm::save_peft_adapter(dir / "adapter", model.config(), *lora, *model.adapters(),
                           fs::absolute(st.source_dir).string());
    auto merged = llm::merge_adapters(model.params(), model.config(), *lora, *model.adapters());
    model.save(dir, 5ull << 30, merged.get());
  } else {
    model.save(dir);
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json", "chat_template.jinja"}) {
    if (fs::exists(st.source_dir / f)) {
      fs::copy_file(st.source_dir / f, dir / f, fs::copy_options::overwrite_existing);
    }
  }
}

std::vector<uint8_t> encode_state(const trainer_state& st) {
  std::ostringstream out;
  out.precision(17);
  out << "trainer-state 1 " << st.version << ' ' << st.best_accuracy << ' ' << st.best_step << ' '
      << st.evals_since_best;
  auto s = out.str();
  return {s.begin(), s.end()};
}

bool decode_state(trainer_state& st, const std::vector<uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string tag;
  int format = 0;
  in >> tag >> format >> st.version >> st.best_accuracy >> st.best_step >> st.evals_since_best;
  return tag == "trainer-state" && format == 1 && !in.fail();
}

}  // namespace milesrt::trainer
