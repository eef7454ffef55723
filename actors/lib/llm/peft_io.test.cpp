// LoRA adapters in peft's format against the real peft (PyPI, a test oracle): a peft adapter loads
// in milesrt with peft's log-probs, milesrt's export loads in peft with milesrt's, an export loads
// back bit for bit, and what milesrt cannot apply is refused naming the field or tensor.
#include "actors/lib/llm/peft_io.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm {
namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class PeftIo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        std::filesystem::temp_directory_path() / ("milesrt-peft-io-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ASSERT_EQ(oracle("make '" + dir_.string() + "'", dir_ / "make.log"), 0)
        << slurp(dir_ / "make.log");
    ref_ = nlohmann::json::parse(slurp(dir_ / "reference.json"));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static int oracle(const std::string& args, const std::filesystem::path& out) {
    const std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + MILESRT_SOURCE_DIR +
                            "/test/oracle/peft_oracle.py' " + args + " > '" + out.string() +
                            "' 2> '" + out.string() + ".err'";
    return std::system(cmd.c_str());
  }
  static std::vector<std::vector<int64_t>> sequences() { return ref_["sequences"]; }
  /// Largest |milesrt - want| over every log-prob of the reference sequences.
  static double worst(const decoder& model, const nlohmann::json& want) {
    auto scores = model.score_sequences(sequences(), 1.0);
    double w = 0;
    for (size_t s = 0; s < scores.size(); ++s) {
      std::vector<double> ws = want[s];
      EXPECT_EQ(scores[s].logprobs.numel(), int64_t(ws.size()));
      for (size_t i = 0; i < ws.size(); ++i)
        w = std::max(w, std::abs(scores[s].logprobs[i].item<double>() - ws[i]));
    }
    return w;
  }
  std::unique_ptr<decoder> base() const {
    return decoder::load(dir_ / "base", at::kFloat, at::kCPU);
  }
  /// The error of loading the adapter folder `dir` for the base, or "<loaded>".
  std::string load_error(const std::filesystem::path& dir) const {
    auto model = base();
    try {
      load_peft_adapter(dir, model->config(), dir_ / "base", at::kFloat, at::kCPU);
      return "<loaded>";
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  static std::filesystem::path dir_;
  static nlohmann::json ref_;
};
std::filesystem::path PeftIo::dir_;
nlohmann::json PeftIo::ref_;

TEST_F(PeftIo, APeftAdapterLoadsWithPeftsLogProbs) {
  for (const char* name : {"adapter", "adapter_rslora"}) {
    auto model = base();
    auto a = load_peft_adapter(dir_ / name, model->config(), dir_ / "base", at::kFloat, at::kCPU);
    EXPECT_EQ(a.base_model, (dir_ / "base").string());
    const double before = worst(*model, ref_[name]);
    model->set_adapters(a.weights, a.config);
    const double w = worst(*model, ref_[name]);
    EXPECT_LT(w, 1e-4) << name;
    EXPECT_GT(before, 1e-3) << name << ": the adapter changes nothing";
    std::cout << name << ": max |milesrt - peft| = " << w << " (base alone: " << before << ")\n";
  }
  EXPECT_EQ(read_peft_config(dir_ / "adapter_rslora").target_modules,
            (std::vector<std::string>{"q_proj", "v_proj"}));
}

TEST_F(PeftIo, AnExportLoadsInPeftAndBackWithTheSameLogProbs) {
  auto model = base();
  lora_config c;
  c.rank = 3;
  c.alpha = 6;
  c.target_modules = {"q_proj", "o_proj", "up_proj", "down_proj"};
  auto adapters = make_adapters(model->config(), c, at::kFloat, at::kCPU, 7);
  {
    at::NoGradGuard no_grad;
    const_cast<at::Tensor&>(adapters->buffer()).normal_(0, 0.05);  // B non-zero too
  }
  model->set_adapters(adapters, c);
  const auto out = dir_ / "export";
  save_peft_adapter(out, model->config(), c, *adapters, (dir_ / "base").string());
  std::ofstream(dir_ / "seqs.json") << nlohmann::json({{"sequences", sequences()}}).dump();
  ASSERT_EQ(oracle("check '" + (dir_ / "base").string() + "' '" + out.string() + "' '" +
                       (dir_ / "seqs.json").string() + "'",
                   dir_ / "check.json"),
            0)
      << slurp(dir_ / "check.json.err");
  auto peft = nlohmann::json::parse(slurp(dir_ / "check.json"));
  const double w = worst(*model, peft["logprobs"]);
  EXPECT_LT(w, 1e-4);
  std::cout << "export: max |milesrt - peft| = " << w << "\n";
  // Round trip: the export loads back as the same adapters, bit for bit.
  auto back = load_peft_adapter(out, model->config(), dir_ / "base", at::kFloat, at::kCPU);
  EXPECT_EQ(back.config.rank, 3);
  EXPECT_EQ(back.config.alpha, 6.0);
  EXPECT_EQ(back.config.target_modules, c.target_modules);
  EXPECT_TRUE(at::equal(back.weights->buffer(), adapters->buffer()));
  auto again = base();
  again->set_adapters(back.weights, back.config);
  auto a = model->score_sequences(sequences(), 1.0), b = again->score_sequences(sequences(), 1.0);
  for (size_t s = 0; s < a.size(); ++s) EXPECT_TRUE(at::equal(a[s].logprobs, b[s].logprobs));
}

// peft's LoRA on transformers' fused experts (target_parameters = mlp.experts.gate_up_proj
// [E, 2I, H] and mlp.experts.down_proj [E, H, I]) plus q_proj, v_proj, on a Qwen3-MoE base.
TEST_F(PeftIo, APeftAdapterOfFusedExpertsLoadsWithPeftsLogProbs) {
  auto model = decoder::load(dir_ / "moe_base", at::kFloat, at::kCPU);
  const double base_gap = worst(*model, ref_["moe_base"]);
  EXPECT_LT(base_gap, 1e-4) << "the MoE base alone differs from transformers'";
  auto a = load_peft_adapter(dir_ / "moe_adapter", model->config(), dir_ / "moe_base", at::kFloat,
                             at::kCPU);
  EXPECT_EQ(a.config.target_parameters,
            (std::vector<std::string>{"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}));
  EXPECT_EQ(a.config.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  const double before = worst(*model, ref_["moe_adapter"]);
  model->set_adapters(a.weights, a.config);
  const double w = worst(*model, ref_["moe_adapter"]);
  EXPECT_LT(w, 1e-4);
  EXPECT_GT(before, 1e-3) << "the adapter changes nothing";
  std::cout << "moe_adapter: max |milesrt - peft| = " << w << " (base alone: " << before << ")\n";
  // Without the attention modules, the experts' adapters alone still change the log-probs.
  auto experts_only = a.config;
  experts_only.target_modules = {};
  auto only = make_adapters(model->config(), experts_only, at::kFloat, at::kCPU, 1);
  for (const auto& name : only->names())
    const_cast<at::Tensor&>(only->get(name)).copy_(a.weights->get(name));
  model->set_adapters(only, experts_only);
  EXPECT_GT(worst(*model, ref_["moe_base"]), 1e-3) << "the experts' adapters change nothing";
}

// milesrt's own expert adapters exported in peft's format: peft loads them with milesrt's
// log-probs (both parameters, and gate_up_proj alone: peft names a lone wrapper differently),
// and they load back bit for bit.
TEST_F(PeftIo, AnExportOfExpertAdaptersLoadsInPeftAndBack) {
  std::ofstream(dir_ / "seqs.json") << nlohmann::json({{"sequences", sequences()}}).dump();
  const std::vector<std::vector<std::string>> variants = {
      {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}, {"mlp.experts.gate_up_proj"}};
  for (const auto& parameters : variants) {
    auto model = decoder::load(dir_ / "moe_base", at::kFloat, at::kCPU);
    lora_config c;
    c.rank = 2;
    c.alpha = 3;
    c.target_modules = {"o_proj"};
    c.target_parameters = parameters;
    auto adapters = make_adapters(model->config(), c, at::kFloat, at::kCPU, 7);
    {
      at::NoGradGuard no_grad;
      const_cast<at::Tensor&>(adapters->buffer()).normal_(0, 0.1);  // B non-zero too
    }
    model->set_adapters(adapters, c);
    const auto out = dir_ / ("moe_export" + std::to_string(parameters.size()));
    save_peft_adapter(out, model->config(), c, *adapters, (dir_ / "moe_base").string());
    ASSERT_EQ(oracle("check '" + (dir_ / "moe_base").string() + "' '" + out.string() + "' '" +
                         (dir_ / "seqs.json").string() + "'",
                     dir_ / "check_moe.json"),
              0)
        << slurp(dir_ / "check_moe.json.err");
    auto peft = nlohmann::json::parse(slurp(dir_ / "check_moe.json"));
    const double w = worst(*model, peft["logprobs"]);
    EXPECT_LT(w, 1e-4) << parameters.size() << " parameters";
    EXPECT_GT(worst(*model, ref_["moe_base"]), 1e-3) << "the adapters change nothing";
    std::cout << "MoE export (" << parameters.size() << " parameters): max |milesrt - peft| = " << w
              << "\n";
    auto back = load_peft_adapter(out, model->config(), dir_ / "moe_base", at::kFloat, at::kCPU);
    EXPECT_EQ(back.config.target_parameters, parameters);
    EXPECT_TRUE(at::equal(back.weights->buffer(), adapters->buffer()));
  }
}

TEST_F(PeftIo, WhatMilesrtCannotApplyIsRefusedNamingTheField) {
  const auto good = nlohmann::json::parse(slurp(dir_ / "adapter" / "adapter_config.json"));
  const auto cfg = (dir_ / "bad" / "adapter_config.json").string();
  auto with = [&](const std::string& field, const nlohmann::json& value) {
    std::filesystem::remove_all(dir_ / "bad");
    std::filesystem::create_directories(dir_ / "bad");
    std::filesystem::copy_file(dir_ / "adapter" / "adapter_model.safetensors",
                               dir_ / "bad" / "adapter_model.safetensors");
    auto j = good;
    j[field] = value;
    std::ofstream(cfg) << j.dump();
    return load_error(dir_ / "bad");
  };
  EXPECT_EQ(with("use_dora", true), cfg + ": field 'use_dora': DoRA is not supported");
  EXPECT_EQ(with("modules_to_save", {"lm_head"}),
            cfg + ": field 'modules_to_save': fully trained extra modules are not supported");
  EXPECT_EQ(with("bias", "all"), cfg + ": field 'bias': 'all' is not supported (only \"none\")");
  EXPECT_EQ(with("peft_type", "PREFIX_TUNING"),
            cfg + ": field 'peft_type': '\"PREFIX_TUNING\"' is not LORA");
  EXPECT_EQ(with("target_modules", {"q_proj", "lm_head"}),
            cfg +
                ": field 'target_modules': unknown module 'lm_head' (known: q_proj, k_proj, "
                "v_proj, o_proj, gate_proj, up_proj, down_proj)");
  EXPECT_EQ(with("target_modules", ".*attn.*"),
            cfg +
                ": field 'target_modules': the pattern '.*attn.*' is not supported: list the "
                "module names");
  EXPECT_EQ(with("r", 0), cfg + ": field 'r': must be between 1 and 4096 (it is 0)");
  EXPECT_EQ(with("target_parameters", {"mlp.experts.down_proj"}),
            cfg + ": for the base " + (dir_ / "base").string() +
                ": targetParameters: 'mlp.experts.down_proj' names the experts of "
                "mixture-of-experts layers; the model has none");
  EXPECT_EQ(with("target_parameters", {"mlp.experts.w1"}),
            cfg +
                ": field 'target_parameters': unknown parameter 'mlp.experts.w1' (known: "
                "mlp.experts.gate_up_proj, mlp.experts.down_proj)");
  EXPECT_EQ(with("lora_bias", true),
            cfg + ": field 'lora_bias': this LoRA variant is not supported");
  // Fewer targets than the file holds: its extra tensors are not silently dropped.
  EXPECT_EQ(with("target_modules", {"q_proj"}),
            (dir_ / "bad" / "adapter_model.safetensors").string() +
                ": tensor 'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight' is not an "
                "adapter of the target_modules of " +
                cfg);
  // "all-linear" is every module: the adapter loads.
  EXPECT_EQ(with("target_modules", "all-linear"), "<loaded>");
  // An adapter of another base: its rank-4 tensors read against a base of another width.
  std::filesystem::create_directories(dir_ / "wide");
  {
    auto j = nlohmann::json::parse(slurp(dir_ / "base" / "config.json"));
    j["intermediate_size"] = 96;
    std::ofstream(dir_ / "wide" / "config.json") << j.dump();
  }
  auto wide = load_config(dir_ / "wide");
  try {
    load_peft_adapter(dir_ / "adapter", wide, dir_ / "wide", at::kFloat, at::kCPU);
    ADD_FAILURE() << "an adapter of another base loaded";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir_ / "adapter" / "adapter_config.json").string() +
                  ": field 'base_model_name_or_path': the adapter was made for " +
                  (dir_ / "base").string() + ", whose config.json differs from " +
                  (dir_ / "wide" / "config.json").string());
  }
  {
    // Without a base folder to compare with, the tensors' shapes say it.
    auto j = good;
    j["base_model_name_or_path"] = "Qwen/Qwen3-0.6B";
    std::filesystem::remove_all(dir_ / "bad");
    std::filesystem::create_directories(dir_ / "bad");
    std::filesystem::copy_file(dir_ / "adapter" / "adapter_model.safetensors",
                               dir_ / "bad" / "adapter_model.safetensors");
    std::ofstream(cfg) << j.dump();
    try {
      load_peft_adapter(dir_ / "bad", wide, dir_ / "wide", at::kFloat, at::kCPU);
      ADD_FAILURE() << "an adapter of another base loaded";
    } catch (const std::exception& e) {
      EXPECT_NE(
          std::string(e.what()).find("mlp.gate_proj.lora_B.weight' has shape [80, 4], the base " +
                                     (dir_ / "wide").string() +
                                     " needs [96, 4] (an adapter made for another base: "
                                     "Qwen/Qwen3-0.6B)"),
          std::string::npos)
          << e.what();
    }
  }
}

// Adapters of NaN or inf would make every forward NaN (and a filter drop every group): refused at
// load naming the file and the tensor; an adapter_config.json that is a FIFO is refused without
// opening it.
TEST_F(PeftIo, NonFiniteAdaptersAndNonRegularFilesAreRefused) {
  auto model = base();
  lora_config c;
  c.rank = 2;
  c.alpha = 4;
  c.target_modules = {"q_proj", "v_proj"};
  auto adapters = make_adapters(model->config(), c, at::kFloat, at::kCPU, 7);
  const std::string second = adapters->names()[1];
  {
    at::NoGradGuard no_grad;
    auto t = adapters->get(second);
    t.view(-1)[0] = std::numeric_limits<float>::infinity();
    t.view(-1)[1] = std::nanf("");
  }
  const auto out = dir_ / "non_finite";
  save_peft_adapter(out, model->config(), c, *adapters, (dir_ / "base").string());
  EXPECT_EQ(load_error(out), (out / "adapter_model.safetensors").string() + ": tensor '" + second +
                                 "' holds 2 non-finite values (NaN or inf)");
  std::filesystem::remove(out / "adapter_config.json");
  ASSERT_EQ(::mkfifo((out / "adapter_config.json").c_str(), 0600), 0);
  EXPECT_EQ(load_error(out),
            (out / "adapter_config.json").string() + ": a FIFO, not a regular file");
}

}  // namespace
}  // namespace milesrt::llm
