#include "actors/lib/llm/lora_params.hpp"

#include <filesystem>
#include <sstream>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/peft_io.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {

lora_config to_lora_config(schema::Lora::Reader r) {
  lora_config c;
  c.rank = r.getRank();
  c.alpha = r.getAlpha();
  c.dropout = r.getDropout();
  c.use_rslora = r.getUseRslora();
  for (auto t : r.getTargetModules()) c.target_modules.emplace_back(t.cStr(), t.size());
  for (auto t : r.getTargetParameters()) c.target_parameters.emplace_back(t.cStr(), t.size());
  return c;
}

std::string lora_agreement(bool has_section, schema::Lora::Reader r) {
  if (!has_section) return "none";
  auto list = [](capnp::List<capnp::Text>::Reader l) {
    std::string out;
    for (auto t : l) out += (out.empty() ? "" : ",") + std::string(t.cStr(), t.size());
    return out.empty() ? std::string("-") : out;
  };
  std::ostringstream s;
  s << "rank " << r.getRank() << ", alpha " << r.getAlpha() << ", useRslora "
    << (r.getUseRslora() ? "true" : "false") << ", targetModules " << list(r.getTargetModules())
    << ", targetParameters " << list(r.getTargetParameters());
  if (r.hasAdapter() && r.getAdapter().size() > 0)
    s << ", adapter " << std::string(r.getAdapter().cStr());
  else
    s << ", seed " << r.getSeed();
  return s.str();
}

problem_list lora_params_problems(schema::Lora::Reader r, const std::string& model_dir) {
  const auto c = to_lora_config(r);
  std::optional<model_config> m;
  std::error_code ec;
  const bool read = runtime::named_files_read();
  if (read && !model_dir.empty() &&
      std::filesystem::is_regular_file(std::filesystem::path(model_dir) / "config.json", ec)) {
    try {
      m = load_config(model_dir);
    } catch (const std::exception&) {
      // The model's own check names what is wrong with its config.json.
    }
  }
  problem_list out;
  add_within(out, "lora", lora_config_problems(c, m ? &*m : nullptr));
  if (read && r.hasAdapter() && r.getAdapter().size() > 0) {
    const std::string dir = r.getAdapter();
    try {
      const auto theirs = read_peft_config(dir);
      auto differs = [&](const char* field, const std::string& ours, const std::string& peft) {
        if (ours != peft) {
          out.push_back(
              {std::string("lora.") + field, ours + ", but the adapter " + dir + " has " + peft});
        }
      };
      auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return "[" + s + "]";
      };
      differs("rank", std::to_string(c.rank), std::to_string(theirs.rank));
      differs("alpha", std::to_string(c.alpha), std::to_string(theirs.alpha));
      differs("useRslora", c.use_rslora ? "true" : "false", theirs.use_rslora ? "true" : "false");
      differs("targetModules", list(c.target_modules), list(theirs.target_modules));
      differs("targetParameters", list(c.target_parameters), list(theirs.target_parameters));
      // The tensors against the base: read them (small) when the base's config is readable.
      if (m && out.empty()) load_peft_adapter(dir, *m, model_dir, at::kFloat, at::kCPU);
    } catch (const std::exception& e) {
      out.push_back(problem_of("lora.adapter", e));
    }
  }
  return out;
}

void attach_initial_adapters(decoder& model, schema::Lora::Reader r, const std::string& model_dir) {
  auto c = to_lora_config(r);
  if (r.hasAdapter() && r.getAdapter().size() > 0) {
    auto a = load_peft_adapter(std::string(r.getAdapter()), model.config(), model_dir,
                               model.dtype(), model.device());
    a.config.dropout = c.dropout;  // a training setting: the graph's
    model.set_adapters(a.weights, a.config);
    return;
  }
  model.set_adapters(make_adapters(model.config(), c, model.dtype(), model.device(), r.getSeed()),
                     c);
}

}  // namespace milesrt::llm
