// milesrt_arith_make: writes everything the arithmetic example needs into one folder:
//   model/      a small Qwen3-architecture model (config.json, model.safetensors with random
//               weights) and its tokenizer (tokenizer.json, tokenizer_config.json);
//   sft.jsonl   demonstrations from a "sloppy teacher" who forgets the carry now and then;
//   rl.jsonl    prompts with their true answers (the labels the math reward checks);
//   heldout.jsonl  prompts never seen in training, for the accuracy the run reports.
// Problems are "a+b=" with a, b in [0, max]; the answer is the sum, then the end-of-text token.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "actors/lib/llm/model.hpp"

namespace fs = std::filesystem;

namespace {

/// The vocabulary: digits, the operators, space, and the end-of-text token (16 tokens: the
/// model's dimensions stay multiples of 16).
const std::vector<std::string> kVocab = {"0", "1", "2", "3", "4", "5", "6", "7",
                                         "8", "9", "+", "=", "-", "*", " ", "<|endoftext|>"};

void write_tokenizer(const fs::path& dir) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kVocab.size(); ++i) vocab[kVocab[i]] = i;
  nlohmann::ordered_json tok = {{"version", "1.0"},
                                {"truncation", nullptr},
                                {"padding", nullptr},
                                {"added_tokens",
                                 {{{"id", kVocab.size() - 1},
                                   {"content", "<|endoftext|>"},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}}}},
                                {"normalizer", nullptr},
                                {"pre_tokenizer", nullptr},
                                {"post_processor", nullptr},
                                {"decoder", {{"type", "Fuse"}}},
                                {"model",
                                 {{"type", "BPE"},
                                  {"dropout", nullptr},
                                  {"unk_token", nullptr},
                                  {"continuing_subword_prefix", nullptr},
                                  {"end_of_word_suffix", nullptr},
                                  {"fuse_unk", false},
                                  {"byte_fallback", false},
                                  {"ignore_merges", false},
                                  {"vocab", vocab},
                                  {"merges", nlohmann::ordered_json::array()}}}};
  std::ofstream(dir / "tokenizer.json") << tok.dump(2) << "\n";
  nlohmann::ordered_json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                {"eos_token", "<|endoftext|>"},
                                {"pad_token", "<|endoftext|>"},
                                {"model_max_length", 64}};
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump(2) << "\n";
}

/// Qwen3, or with `experts` > 0 Qwen3-MoE: every layer's MLP `experts` experts of half the dense
/// width, `per_token` of them chosen per token.
std::string model_config(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads,
                         int64_t experts, int64_t per_token) {
  nlohmann::ordered_json c = {{"architectures", {"Qwen3ForCausalLM"}},
                              {"model_type", "qwen3"},
                              {"vocab_size", kVocab.size()},
                              {"hidden_size", hidden},
                              {"intermediate_size", hidden * 3},
                              {"num_hidden_layers", layers},
                              {"num_attention_heads", heads},
                              {"num_key_value_heads", kv_heads},
                              {"head_dim", hidden / heads},
                              {"hidden_act", "silu"},
                              {"max_position_embeddings", 64},
                              {"rms_norm_eps", 1e-6},
                              {"rope_theta", 10000.0},
                              {"tie_word_embeddings", true},
                              {"attention_bias", false},
                              {"torch_dtype", "float32"},
                              {"bos_token_id", kVocab.size() - 1},
                              {"eos_token_id", kVocab.size() - 1}};
  if (experts > 0) {
    c["architectures"] = {"Qwen3MoeForCausalLM"};
    c["model_type"] = "qwen3_moe";
    c["num_experts"] = experts;
    c["num_experts_per_tok"] = per_token;
    c["moe_intermediate_size"] = hidden * 3 / 2;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = nlohmann::ordered_json::array();
  }
  return c.dump(2);
}

/// The teacher's answer: the true sum, except that with probability `slip` a carry out of the
/// ones digit is forgotten (27+15 -> 32).
int64_t teacher_answer(int64_t a, int64_t b, double slip, std::mt19937_64& rng) {
  const bool carry = (a % 10) + (b % 10) >= 10;
  if (carry && std::uniform_real_distribution<double>(0, 1)(rng) < slip) return a + b - 10;
  return a + b;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes the arithmetic example's model, tokenizer and datasets"};
  std::string out = "runs/arith/setup";
  int64_t max_operand = 49, sft_size = 2000, rl_size = 4000, heldout = 200, hidden = 128,
          layers = 2, heads = 4, kv_heads = 1, experts = 0, per_token = 2;
  double slip = 0.6;
  uint64_t seed = 7;
  app.add_option("--out", out, "the folder to write");
  app.add_option("--max-operand", max_operand, "operands are drawn from [0, max]");
  app.add_option("--sft-size", sft_size, "demonstrations");
  app.add_option("--rl-size", rl_size, "RL prompts");
  app.add_option("--heldout", heldout, "held-out prompts");
  app.add_option("--slip", slip, "how often the teacher forgets a carry");
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--layers", layers, "layers");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--kv-heads", kv_heads, "key/value heads");
  app.add_option("--experts", experts, "experts per layer (0: a dense model, else Qwen3-MoE)");
  app.add_option("--experts-per-token", per_token, "experts chosen per token (with --experts)");
  app.add_option("--seed", seed, "seed of the data and the initial weights");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir = out;
  fs::create_directories(dir / "model");
  write_tokenizer(dir / "model");
  auto model = milesrt::llm::decoder::random(
      model_config(hidden, layers, heads, kv_heads, experts, per_token), at::kFloat,
      at::Device(at::kCPU), seed);
  model->save(dir / "model");

  // Every problem once: held-out ones first, then the rest shared out to SFT and RL prompts.
  std::mt19937_64 rng(seed);
  std::vector<std::pair<int64_t, int64_t>> all;
  for (int64_t a = 0; a <= max_operand; ++a)
    for (int64_t b = 0; b <= max_operand; ++b) all.push_back({a, b});
  std::shuffle(all.begin(), all.end(), rng);
  if (static_cast<int64_t>(all.size()) <= heldout) {
    std::cerr << "milesrt_arith_make: --heldout must be smaller than the " << all.size()
              << " problems\n";
    return 2;
  }
  auto prompt = [](int64_t a, int64_t b) {
    return std::to_string(a) + "+" + std::to_string(b) + "=";
  };
  std::ofstream held(dir / "heldout.jsonl"), sft(dir / "sft.jsonl"), rl(dir / "rl.jsonl");
  for (int64_t i = 0; i < heldout; ++i) {
    auto [a, b] = all[i];
    held << nlohmann::json{{"prompt", prompt(a, b)}, {"label", std::to_string(a + b)}}.dump()
         << "\n";
  }
  std::vector<std::pair<int64_t, int64_t>> pool(all.begin() + heldout, all.end());
  for (int64_t i = 0; i < sft_size; ++i) {
    auto [a, b] = pool[i % pool.size()];
    sft << nlohmann::json{{"prompt", prompt(a, b)},
                          {"response", std::to_string(teacher_answer(a, b, slip, rng))},
                          {"label", std::to_string(a + b)}}
               .dump()
        << "\n";
  }
  for (int64_t i = 0; i < rl_size; ++i) {
    auto [a, b] = pool[(i * 7919) % pool.size()];
    rl << nlohmann::json{{"prompt", prompt(a, b)}, {"label", std::to_string(a + b)}}.dump() << "\n";
  }
  std::cout << "milesrt_arith_make: wrote " << dir.string() << " (" << all.size() - heldout
            << " training problems, " << heldout << " held out; teacher slip " << slip << ")\n";
  return 0;
}
