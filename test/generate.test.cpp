// End to end: `milesrt generate` on a model folder with a real tokenizer.json: text, chat messages
// and ids in; samples out; deterministic; log-probs equal to `milesrt score`'s.
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "actors/lib/llm/model.hpp"
#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l));
  return out;
}

TEST(Generate, SamplesFromTextMessagesAndIdsAndAgreesWithScore) {
  auto dir = scratch("generate");
  auto model_dir = dir / "model";
  // A random one-layer Qwen3 over the 33.5k-token tokenizer the build trains (test/tokenizer_data).
  auto model = milesrt::llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 33520,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "hidden_act": "silu"})",
                                             at::kFloat, at::kCPU, 9);
  model->save(model_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(fs::path(MILESRT_TOKENIZER_DATA) / "qwen3" / f, model_dir / f);
  }
  std::ofstream(dir / "in.jsonl")
      << R"({"prompt": "Hello world", "max_new_tokens": 5, "n": 2, "seed": 3, "ignore_eos": true})"
      << "\n"
      << R"({"messages": [{"role": "user", "content": "hi"}], "max_new_tokens": 4, "top_k": 50})"
      << "\n"
      << R"({"prompt_ids": [1, 2, 3], "max_new_tokens": 6, "temperature": 0.5, "ignore_eos": true})"
      << "\n"
      << R"({"prompt_ids": [999999]})"
      << "\n";
  auto cmd =
      "generate --model '" + model_dir.string() + "' < '" + (dir / "in.jsonl").string() + "'";
  auto r = run_milesrt(cmd, "gen1");
  EXPECT_EQ(r.status, 2) << r.err;  // the last line is bad
  auto out = json_lines(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;
  EXPECT_EQ(out[0]["index"], 0);
  EXPECT_EQ(out[1]["index"], 1);
  EXPECT_EQ(out[0]["output_ids"].size(), 5u);
  EXPECT_EQ(out[0]["finish_reason"], "length");
  EXPECT_TRUE(out[0]["text"].is_string());
  EXPECT_NE(out[0]["output_ids"], out[1]["output_ids"]);  // two samples, two random streams
  EXPECT_LE(out[2]["output_ids"].size(), 4u);
  EXPECT_EQ(out[4]["error"],
            "line 4: request 4: token id 999999 is outside the vocabulary of 33520");
  // Same input, same output.
  auto again = run_milesrt(cmd, "gen2");
  EXPECT_EQ(again.out, r.out);
  // The log-probs the engine recorded are the ones `milesrt score` computes for the same ids.
  std::vector<int64_t> ids = {1, 2, 3};
  for (auto& id : out[3]["output_ids"]) ids.push_back(id.get<int64_t>());
  std::ofstream(dir / "score.jsonl")
      << nlohmann::json({{"ids", ids}, {"temperature", 0.5}}).dump() << "\n";
  auto s = run_milesrt(
      "score --model '" + model_dir.string() + "' < '" + (dir / "score.jsonl").string() + "'",
      "gen-score");
  ASSERT_EQ(s.status, 0) << s.err;
  auto scored = json_lines(s.out)[0]["logprobs"];
  ASSERT_EQ(scored.size(), ids.size() - 1);
  for (size_t i = 0; i < out[3]["logprobs"].size(); ++i) {
    EXPECT_EQ(scored[2 + i].get<float>(), out[3]["logprobs"][i].get<float>()) << i;
  }
  fs::remove_all(dir);
}

// --chat-template FILE.jinja and a line's tools / chat_template_kwargs reach the template; its
// raise_exception comes back as that line's error, naming the file.
TEST(Generate, ChatTemplateFileAndItsKeywordArguments) {
  auto dir = scratch("generate-chat");
  auto model_dir = dir / "model";
  auto model = milesrt::llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 33520,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "hidden_act": "silu"})",
                                             at::kFloat, at::kCPU, 9);
  model->save(model_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(fs::path(MILESRT_TOKENIZER_DATA) / "qwen3" / f, model_dir / f);
  }
  std::ofstream(dir / "t.jinja")
      << "{% if enable_thinking is not defined %}{{ raise_exception('no enable_thinking') }}"
      << "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}{{ tools | length }}";
  std::ofstream(dir / "in.jsonl")
      << R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false},)"
      << R"( "tools": [], "max_new_tokens": 2, "ignore_eos": true})"
      << "\n"
      << R"({"messages": [{"role": "user", "content": "hi"}], "max_new_tokens": 2})"
      << "\n";
  auto r = run_milesrt("generate --model '" + model_dir.string() + "' --chat-template '" +
                           (dir / "t.jinja").string() + "' < '" + (dir / "in.jsonl").string() + "'",
                       "gen-chat");
  EXPECT_EQ(r.status, 2) << r.err;  // the second line is bad
  auto out = json_lines(r.out);
  ASSERT_EQ(out.size(), 2u) << r.out;
  EXPECT_EQ(out[0]["output_ids"].size(), 2u) << out[0];
  EXPECT_EQ(out[1]["error"],
            "line 2: " + (dir / "t.jinja").string() + ": template line 1: no enable_thinking");
  fs::remove_all(dir);
}

}  // namespace
