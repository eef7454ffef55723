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

/// dir/model: a random one-layer Qwen3 over the 33.5k-token tokenizer the build trains
/// (test/tokenizer_data), with that tokenizer.
fs::path model_folder(const fs::path& dir) {
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
  return model_dir;
}

TEST(Generate, SamplesFromTextMessagesAndIdsAndAgreesWithScore) {
  auto dir = scratch("generate");
  auto model_dir = model_folder(dir);
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
            "line 4: 'prompt_ids[0]' must be an integer from 0 to 33519, got 999999");
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
  auto model_dir = model_folder(dir);
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

// A bad line is answered with its error, naming the field, and the lines after it are served:
// invalid UTF-8, values of the wrong type, fractions where integers belong and numbers outside
// their limits (docs/limits.md, "Sampling") are refused, never wrapped or truncated. A recursing
// chat template is an error of its line; too many KV blocks are refused before anything runs,
// and errors carry no stack-trace frames.
TEST(Generate, BadLinesAreRefusedByFieldAndTheRestServed) {
  auto dir = scratch("generate-bad");
  auto model_dir = model_folder(dir);
  const std::string ok = R"({"prompt_ids": [1, 2], "max_new_tokens": 1, "ignore_eos": true)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"prompt\": \"\xff\xfe\"}", "syntax error while parsing value - invalid string"},
      {R"({"prompt": 5})", "'prompt' must be a string, got 5"},
      {ok + R"(, "n": 1000000000})", "'n' must be an integer from 1 to 4096, got 1000000000"},
      {ok + R"(, "n": 1.5})", "'n' must be an integer from 1 to 4096, got 1.5"},
      {R"({"prompt_ids": [1], "max_new_tokens": 2.7})",
       "'max_new_tokens' must be an integer from 1 to 1048576, got 2.7"},
      {ok + R"(, "seed": -1})", "'seed' must be an integer from 0 to 18446744073709551615, got -1"},
      {ok + R"(, "seed": 1.5})", "'seed' must be an integer from 0 to 18446744073709551615"},
      {ok + R"(, "seed": 1e30})", "'seed' must be an integer from 0 to 18446744073709551615"},
      {ok + R"(, "temperature": 1e-300})", "'temperature' must be a number from 1e-05 to 100000"},
      {R"({"prompt_ids": [1, 4294967297]})",
       "'prompt_ids[1]' must be an integer from 0 to 33519, got 4294967297"},
      {R"({"prompt_ids": [1, 2.0]})", "'prompt_ids[1]' must be an integer from 0 to 33519"},
      {R"({"messages": [{"role": "user", "content": "hi"}]})",
       "macro 'f': calls nested deeper than 100"},
      {"[1]", "expected a JSON object"},
  };
  std::ofstream(dir / "t.jinja") << "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}";
  {
    std::ofstream in(dir / "in.jsonl");
    for (const auto& c : cases) in << c.first << "\n";
    in << ok << "}\n";
  }
  auto r = run_milesrt("generate --model '" + model_dir.string() + "' --chat-template '" +
                           (dir / "t.jinja").string() + "' < '" + (dir / "in.jsonl").string() + "'",
                       "gen-bad");
  EXPECT_EQ(r.status, 2) << r.err;
  auto out = json_lines(r.out);
  ASSERT_EQ(out.size(), cases.size() + 1) << r.out << r.err;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string e = out[i].value("error", "(no error)");
    EXPECT_EQ(e.rfind("line " + std::to_string(i + 1) + ": ", 0), 0u) << e;
    EXPECT_NE(e.find(cases[i].second), std::string::npos) << e;
    EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
  }
  EXPECT_EQ(out.back()["output_ids"].size(), 1u) << out.back();
  // A KV cache larger than the machine: refused before any line is read, without frames.
  auto kv = run_milesrt(
      "generate --model '" + model_dir.string() + "' --kv-blocks 20000000000000 < /dev/null",
      "gen-kv");
  EXPECT_EQ(kv.status, 2) << kv.err;
  EXPECT_NE(kv.err.find("--kv-blocks: the KV cache of "), std::string::npos) << kv.err;
  EXPECT_EQ(kv.err.find("frame #"), std::string::npos) << kv.err;
  fs::remove_all(dir);
}

}  // namespace
