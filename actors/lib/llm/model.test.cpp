#include "actors/lib/llm/model.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <torch/csrc/autograd/autograd.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/bf16_testing.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/safetensors.hpp"

namespace milesrt::llm {
namespace {
namespace fs = std::filesystem;

/// Small configs of the four families (GQA ratio 2, head_dim != hidden/heads for Qwen3). Sizes are
/// multiples of 16, as in every real model: the bitwise agreement of the two paths relies on it.
std::string config_json(const std::string& family) {
  std::string common = R"("vocab_size": 112, "hidden_size": 64, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "max_position_embeddings": 512)";
  if (family == "qwen3") {
    return R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "head_dim": 32,
      "rope_theta": 1000000.0, "tie_word_embeddings": true, )" +
           common + "}";
  }
  if (family == "qwen2") {
    return R"({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
      "rope_theta": 10000.0, "tie_word_embeddings": false, )" +
           common + "}";
  }
  if (family == "llama") {
    return R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
      )" + common +
           "}";
  }
  return R"({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "head_dim": 16,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [1], )" +
         common + "}";
}

class Model : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("milesrt-model-" + std::to_string(::getpid()) + "-" + GetParam());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << config_json(GetParam());
    auto config = load_config(dir_);
    at::manual_seed(42);
    std::vector<at::Tensor> keep;
    std::vector<tensor_bytes> tensors;
    for (const auto& [name, shape] : parameter_specs(config)) {
      bool norm = name.find("norm") != std::string::npos;
      auto t = norm ? 1.0 + 0.1 * at::randn(shape) : 0.2 * at::randn(shape);
      t = t.contiguous();
      keep.push_back(t);
      tensors.push_back({name, dtype::f32, shape, t.data_ptr(), size_t(t.numel()) * 4});
    }
    write_safetensors(dir_, tensors);
    model_ = decoder::load(dir_, at::kFloat, at::kCPU);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::vector<int64_t>> sequences() {
    std::mt19937 rng(7);
    std::vector<std::vector<int64_t>> seqs;
    for (int len : {1, 2, 9, 33, 70}) {
      std::vector<int64_t> s;
      for (int i = 0; i < len; ++i) s.push_back(rng() % 112);
      seqs.push_back(s);
    }
    return seqs;
  }

  fs::path dir_;
  std::unique_ptr<decoder> model_;
};

// Path (a), one packed pass, against path (b): chunked prefill then one-token decode steps through
// a paged cache, several sequences batched in each step. Bitwise equal in fp32 on the CPU.
TEST_P(Model, TrainingAndServingPathsAgreeBitwise) {
  auto seqs = sequences();
  const double temperature = 0.7;
  forward_result packed_details;
  auto packed = model_->score_sequences(seqs, temperature, 16, &packed_details);

  const int64_t block = 4;
  auto cache = model_->make_cache(64, block);
  std::vector<std::vector<int32_t>> tables(seqs.size());
  int32_t next_block = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (size_t b = 0; b * block < seqs[s].size(); ++b) tables[s].push_back(63 - next_block++);
  }
  // Prefill the first third of each sequence in two chunks, then decode token by token.
  std::vector<int64_t> done(seqs.size(), 0);
  std::vector<std::vector<float>> served(seqs.size()), served_entropy(seqs.size());
  auto step = [&](const std::vector<std::pair<size_t, int64_t>>& work) {
    std::vector<segment> segs;
    for (auto [s, n] : work) {
      std::vector<int64_t> ids(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + n);
      segs.push_back({ids, done[s], &tables[s]});
    }
    auto fr = model_->forward(segs, {&cache, nullptr});
    int64_t row = 0;
    for (auto [s, n] : work) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t pos = done[s] + i;
        if (pos + 1 < int64_t(seqs[s].size())) {
          auto r = model_->score_rows(fr.hidden.narrow(0, row + i, 1),
                                      at::tensor({seqs[s][pos + 1]}, at::kLong), temperature, 16);
          served[s].push_back(r.logprobs.item<float>());
          served_entropy[s].push_back(r.entropy.item<float>());
        }
      }
      row += n;
      done[s] += n;
    }
  };
  std::vector<std::pair<size_t, int64_t>> first, second;
  for (size_t s = 0; s < seqs.size(); ++s) {
    int64_t third = int64_t(seqs[s].size()) / 3;
    first.push_back({s, (third + 1) / 2});
  }
  step(first);
  for (size_t s = 0; s < seqs.size(); ++s)
    second.push_back({s, int64_t(seqs[s].size()) / 3 - done[s]});
  step(second);
  while (true) {
    std::vector<std::pair<size_t, int64_t>> work;
    for (size_t s = 0; s < seqs.size(); ++s)
      if (done[s] < int64_t(seqs[s].size())) work.push_back({s, 1});
    if (work.empty()) break;
    step(work);
  }
  for (size_t s = 0; s < seqs.size(); ++s) {
    auto lp = packed[s].logprobs.contiguous();
    auto en = packed[s].entropy.contiguous();
    ASSERT_EQ(lp.numel(), int64_t(served[s].size())) << "sequence " << s;
    for (int64_t i = 0; i < lp.numel(); ++i) {
      ASSERT_EQ(lp.data_ptr<float>()[i], served[s][i]) << "sequence " << s << " position " << i;
      ASSERT_EQ(en.data_ptr<float>()[i], served_entropy[s][i])
          << "sequence " << s << " position " << i;
    }
  }
}

TEST_P(Model, LogProbsDoNotDependOnTheChunkOrTheBatch) {
  auto seqs = sequences();
  auto all = model_->score_sequences(seqs, 1.0, 256);
  auto small_chunks = model_->score_sequences(seqs, 1.0, 3);
  for (size_t s = 0; s < seqs.size(); ++s) {
    EXPECT_TRUE(at::equal(all[s].logprobs, small_chunks[s].logprobs)) << s;
    auto alone = model_->score_sequences({seqs[s]}, 1.0, 256);
    EXPECT_TRUE(at::equal(all[s].logprobs, alone[0].logprobs)) << s;
  }
  // A proper distribution: log-probs are <= 0 and entropies within [0, log vocab].
  EXPECT_LE(all[4].logprobs.max().item<float>(), 0.f);
  EXPECT_GE(all[4].entropy.min().item<float>(), 0.f);
  EXPECT_LE(all[4].entropy.max().item<float>(), std::log(112.0) + 1e-4);
}

TEST_P(Model, ParametersLiveInOneFlatBuffer) {
  const auto& p = model_->params();
  int64_t total = 0;
  for (const auto& n : p.names()) {
    const auto& t = p.get(n);
    EXPECT_EQ(t.storage().data(), p.buffer().storage().data()) << n;
    total += t.numel();
  }
  EXPECT_EQ(total, p.buffer().numel());
  // Saving and loading again gives the same buffer, bit for bit.
  model_->save(dir_ / "saved");
  auto again = decoder::load(dir_ / "saved", at::kFloat, at::kCPU);
  EXPECT_TRUE(at::equal(again->params().buffer(), p.buffer()));
}

TEST_P(Model, RoutingReplayUsesTheGivenExperts) {
  if (GetParam() != "qwen3_moe") GTEST_SKIP() << "dense model";
  auto seqs = sequences();
  std::vector<segment> segs;
  for (auto& s : seqs) segs.push_back({s, 0, nullptr});
  auto fr = model_->forward(segs, {});
  ASSERT_EQ(fr.experts.size(), 1u);  // layer 1 is mlp_only
  EXPECT_EQ(fr.experts[0].size(1), 2);
  // Replaying the recorded experts reproduces the forward exactly...
  auto replay = model_->forward(segs, {nullptr, &fr.experts});
  EXPECT_TRUE(at::equal(replay.hidden, fr.hidden));
  // ...and other experts change it.
  std::vector<at::Tensor> other = {(fr.experts[0] + 1).remainder(4)};
  auto changed = model_->forward(segs, {nullptr, &other});
  EXPECT_FALSE(at::equal(changed.hidden, fr.hidden));
  EXPECT_TRUE(at::equal(changed.experts[0], other[0]));
  auto [loss, share] = load_balance(fr, model_->config().num_experts);
  EXPECT_GT(loss.item<float>(), 0.f);
  EXPECT_NEAR(share.sum().item<float>(), 1.f, 1e-5);
  EXPECT_EQ(share.numel(), 4);
}

INSTANTIATE_TEST_SUITE_P(Families, Model,
                         ::testing::Values("qwen3", "qwen2", "llama", "qwen3_moe"));

class ModelFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-modelfiles-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string load_error() {
    try {
      decoder::load(dir_, at::kFloat, at::kCPU);
      return "<loaded>";
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  fs::path dir_;
};

TEST_F(ModelFiles, ConfigAndWeightErrorsNameTheFieldOrTensor) {
  std::ofstream(dir_ / "config.json") << R"({"model_type": "gpt2"})";
  EXPECT_EQ(load_error(),
            (dir_ / "config.json").string() +
                ": field 'model_type': 'gpt2' is not supported (qwen3, qwen2, llama, qwen3_moe)");
  std::ofstream(dir_ / "config.json") << config_json("qwen2");
  std::vector<float> wrong(112 * 31, 0.f);
  write_safetensors(
      dir_, {{"model.embed_tokens.weight", dtype::f32, {112, 31}, wrong.data(), wrong.size() * 4}});
  EXPECT_EQ(
      load_error(),
      (dir_ / "model.safetensors").string() +
          ": tensor 'model.embed_tokens.weight' has shape [112, 31], the config needs [112, 64]");
  std::vector<float> right(112 * 64, 0.f);
  write_safetensors(
      dir_, {{"model.embed_tokens.weight", dtype::f32, {112, 64}, right.data(), right.size() * 4}});
  EXPECT_EQ(load_error(),
            dir_.string() + ": missing tensor 'model.layers.0.input_layernorm.weight'");
  // Validation sees the same problem without loading anything.
  EXPECT_EQ(model_folder_problem(dir_),
            dir_.string() + ": missing tensor 'model.layers.0.input_layernorm.weight'");
  std::ofstream(dir_ / "config.json")
      << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2})";
  EXPECT_EQ(load_error(),
            (dir_ / "config.json").string() +
                ": field 'num_key_value_heads': 2 must divide num_attention_heads (3)");
}

/// Overwrites the first value of f32 tensor `name` in `file` with `value`.
void poke_f32(const fs::path& file, const std::string& name, float value) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, ' ');
  f.read(header.data(), static_cast<std::streamsize>(n));
  const uint64_t begin = nlohmann::json::parse(header)[name]["data_offsets"][0];
  f.seekp(static_cast<std::streamoff>(8 + n + begin));
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
}

// NaN or inf weights would be served as NaN log-probs with exit 0: refused at load naming the
// file and the tensor, also when the file's values are finite but overflow the dtype they are
// loaded in (FLT_MAX in bf16). A FIFO, a device or a folder where a file belongs is refused
// without being opened (opening the FIFO would block for ever).
TEST_F(ModelFiles, NonFiniteWeightsAndNonRegularFilesAreRefused) {
  auto model = decoder::random(config_json("qwen3"), at::kFloat, at::kCPU, 3);
  model->save(dir_);
  const auto weights = dir_ / "model.safetensors";
  poke_f32(weights, "model.norm.weight", std::numeric_limits<float>::max());
  EXPECT_NO_THROW(decoder::load(dir_, at::kFloat, at::kCPU));
  try {
    decoder::load(dir_, at::kBFloat16, at::kCPU);
    ADD_FAILURE() << "FLT_MAX loaded in bf16";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              weights.string() +
                  ": tensor 'model.norm.weight' holds 1 non-finite value (NaN or inf) once "
                  "converted to BFloat16 (the file's values are too large for it)");
  }
  poke_f32(weights, "model.layers.0.mlp.up_proj.weight", std::nanf(""));
  EXPECT_EQ(load_error(), weights.string() +
                              ": tensor 'model.layers.0.mlp.up_proj.weight' holds "
                              "1 non-finite value (NaN or inf)");
  poke_f32(weights, "model.layers.0.mlp.up_proj.weight", 0.5f);
  poke_f32(weights, "model.norm.weight", -std::numeric_limits<float>::infinity());
  EXPECT_EQ(load_error(), weights.string() +
                              ": tensor 'model.norm.weight' holds 1 non-finite value (NaN or inf)");

  fs::remove(weights);
  ASSERT_EQ(::mkfifo(weights.c_str(), 0600), 0);
  EXPECT_EQ(load_error(), weights.string() + ": a FIFO, not a regular file");
  EXPECT_EQ(model_folder_problem(dir_), weights.string() + ": a FIFO, not a regular file");
  fs::remove(weights);
  fs::create_directories(weights);
  EXPECT_EQ(load_error(), weights.string() + ": a folder, not a regular file");
  fs::rename(dir_ / "config.json", dir_ / "config.json.bak");
  fs::create_symlink("/dev/zero", dir_ / "config.json");
  EXPECT_EQ(load_error(),
            (dir_ / "config.json").string() + ": a character device, not a regular file");
}

// An export that cannot be written (here a file-size limit, as a full disk would) throws naming
// the file and the reason; nothing claims a complete folder.
TEST_F(ModelFiles, AFailedSaveNamesTheFileAndTheReason) {
  auto model = decoder::random(config_json("qwen3"), at::kFloat, at::kCPU, 3);
  auto save_error = [&](rlim_t limit) {
    rlimit old{};
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old;
    small.rlim_cur = limit;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string error = "<saved>";
    try {
      model->save(dir_ / "export");
    } catch (const std::exception& e) {
      error = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    return error;
  };
  EXPECT_EQ(save_error(0), "cannot write " + (dir_ / "export" / "config.json").string() + ": " +
                               std::strerror(EFBIG));
  EXPECT_EQ(save_error(4096), (dir_ / "export" / "model.safetensors").string() +
                                  ": write failed: " + std::strerror(EFBIG));
  EXPECT_NO_THROW(model->save(dir_ / "export"));
  EXPECT_EQ(model_folder_problem(dir_ / "export"), "");
}

// config.json's sizes are bounded (docs/limits.md, "Model folders"), each refusal naming the file
// and the field at fault; a config that is not an object is refused as such.
TEST(ModelConfig, SizesAreBoundedAndErrorsNameTheField) {
  auto error_of = [](const std::string& change) {
    auto j = nlohmann::json::parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
      "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2})");
    j.merge_patch(nlohmann::json::parse(change));
    try {
      parse_config(j.dump(), "c.json");
    } catch (const config_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of("{}"), "(no error)");
  EXPECT_EQ(error_of(R"({"num_hidden_layers": 1000000000})"),
            "c.json: field 'num_hidden_layers': must be from 1 to 1024, got 1000000000");
  EXPECT_EQ(error_of(R"({"head_dim": 1099511627776})"),
            "c.json: field 'head_dim': must be from 1 to 1024, got 1099511627776");
  EXPECT_EQ(error_of(R"({"num_attention_heads": 0})"),
            "c.json: field 'num_attention_heads': must be from 1 to 1024, got 0");
  EXPECT_EQ(error_of(R"({"vocab_size": 1e9})"),
            "c.json: field 'vocab_size': must be an integer, got 1000000000.0");
  EXPECT_EQ(error_of(R"({"hidden_size": 18446744073709551615})"),
            "c.json: field 'hidden_size': must be an integer, got 18446744073709551615");
  EXPECT_EQ(error_of(R"({"rms_norm_eps": -1e-6})"),
            "c.json: field 'rms_norm_eps': must be above 0 and below 1, got -1e-06");
  EXPECT_EQ(error_of(R"({"rope_theta": 0})"),
            "c.json: field 'rope_theta': must be a finite number above 1");
  try {
    parse_config("[1, 2]", "c.json");
    ADD_FAILURE() << "an array was accepted";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "c.json: expected a JSON object (a Hugging Face config.json), got array");
  }
}

using testing::bf16_max_diff;
using testing::bf16_sequences;
using testing::kBf16Config;

TEST(ModelBf16, CpuBf16IsCloseToFp32) {
  auto fp32 = decoder::random(kBf16Config, at::kFloat, at::kCPU, 5);
  auto bf16 = decoder::random(kBf16Config, at::kBFloat16, at::kCPU, 5);
  auto d = bf16_max_diff(fp32->score_sequences(bf16_sequences(), 1.0),
                         bf16->score_sequences(bf16_sequences(), 1.0));
  EXPECT_LT(d, 0.1);
  std::cout << "cpu bf16 vs fp32: max |diff| = " << d << "\n";
}

}  // namespace
}  // namespace milesrt::llm

namespace milesrt::llm {
namespace {

// Selective activation checkpointing: with checkpoint_layers = 1 of 2, the hidden states the head
// sees are still connected by autograd to the last layer's weights (its activations were kept);
// with every layer recomputed (0) they are not (only the final norm is in their graph).
TEST(ModelCheckpointing, OnlyTheFirstLayersAreRecomputed) {
  auto model = decoder::random(config_json("qwen3"), at::kFloat, at::kCPU, 3);
  model->mutable_params().enable_grad();
  for (int64_t recomputed : {0, 1, 2}) {
    forward_options fo;
    fo.checkpoint_layers = recomputed;
    bool reaches_last_layer = false;
    fo.checkpoint_head = [&](const at::Tensor& hidden) {
      const auto& w = model->params().get("model.layers.1.mlp.down_proj.weight");
      auto g = torch::autograd::grad({hidden.sum()}, {w}, {}, /*retain_graph=*/true,
                                     /*create_graph=*/false,
                                     /*allow_unused=*/true);
      reaches_last_layer = g[0].defined();
      return hidden.square().sum();
    };
    model->forward({segment{{5, 7, 11, 13}, 0, nullptr}}, fo);
    EXPECT_EQ(reaches_last_layer, recomputed == 1) << "checkpoint_layers = " << recomputed;
  }
  // Whatever the split, the gradients are the ones of the plain backward.
  auto grad_of = [&](int64_t recomputed) {
    model->mutable_params().grad().zero_();
    forward_options fo;
    fo.checkpoint_layers = recomputed;
    fo.checkpoint_head = [](const at::Tensor& hidden) { return hidden.square().sum(); };
    model->forward({segment{{5, 7, 11, 13}, 0, nullptr}}, fo);
    return model->params().grad().clone();
  };
  const auto all = grad_of(0), first = grad_of(1);
  EXPECT_GT(all.abs().sum().item<double>(), 0.0);
  EXPECT_LT((all - first).abs().max().item<double>(), 1e-6);
}

// The true on-policy mode's switch: on the CPU (batch-invariant already) it changes nothing; on
// CUDA it says why a model cannot run it (the kernels are bf16, head size 128, no LoRA).
TEST(BatchInvariant, TheCpuPathIsUnchangedAndCudaSaysWhatItNeeds) {
  auto model = decoder::random(config_json("qwen3"), at::kFloat, at::kCPU, 3);
  const std::vector<std::vector<int64_t>> seqs = {{5, 7, 11, 13, 17}, {3, 2}};
  const auto before = model->score_sequences(seqs, 0.9);
  model->set_batch_invariant(true);
  EXPECT_TRUE(model->batch_invariant());
  const auto after = model->score_sequences(seqs, 0.9);
  for (size_t i = 0; i < seqs.size(); ++i)
    EXPECT_TRUE(at::equal(before[i].logprobs, after[i].logprobs)) << i;
  const at::Device cuda(at::kCUDA, 0);
  EXPECT_EQ(invariant_ops::problem(at::kCPU, at::kFloat, true, 32), "");
  const std::string fp32 = invariant_ops::problem(cuda, at::kFloat, false, 128);
  const std::string head = invariant_ops::problem(cuda, at::kBFloat16, false, 64);
  if (fp32.find("no CUDA kernels") == std::string::npos) {  // a build with the CUDA kernels
    EXPECT_EQ(fp32, "on cuda the mode needs dtype = bf16");
    EXPECT_EQ(head, "on cuda the mode needs head_dim 128 (the model has 64)");
    EXPECT_EQ(invariant_ops::problem(cuda, at::kBFloat16, true, 128),
              "on cuda the mode is not built for LoRA adapters");
    EXPECT_EQ(invariant_ops::problem(cuda, at::kBFloat16, false, 128), "");
  } else {
    EXPECT_EQ(head, fp32);
  }
}

}  // namespace
}  // namespace milesrt::llm
