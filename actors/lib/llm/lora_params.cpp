#include "actors/lib/llm/lora_params.hpp"

#include <filesystem>

namespace milesrt::llm {

lora_config to_lora_config(schema::Lora::Reader r) {
  lora_config c;
  c.rank = r.getRank();
  c.alpha = r.getAlpha();
  c.dropout = r.getDropout();
  c.use_rslora = r.getUseRslora();
  for (auto t : r.getTargetModules()) c.target_modules.emplace_back(t.cStr(), t.size());
  return c;
}

std::vector<std::string> lora_params_problems(schema::Lora::Reader r,
                                              const std::string& model_dir) {
  const auto c = to_lora_config(r);
  std::optional<model_config> m;
  std::error_code ec;
  if (!model_dir.empty() &&
      std::filesystem::is_regular_file(std::filesystem::path(model_dir) / "config.json", ec)) {
    try {
      m = load_config(model_dir);
    } catch (const std::exception&) {
      // The model's own check names what is wrong with its config.json.
    }
  }
  std::vector<std::string> out;
  for (auto& p : lora_config_problems(c, m ? &*m : nullptr)) out.push_back("lora." + p);
  return out;
}

}  // namespace milesrt::llm
