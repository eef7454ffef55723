// milesrt_agent_calc_make: writes everything the calculator-agent example needs into one folder:
//   model/         a small Qwen3-architecture model (random weights), its tokenizer and its chat
//                  template: a toy vocabulary (characters) with room for the tool tokens;
//   sft.jsonl      demonstrations, one line per assistant turn (prompt: the conversation rendered
//                  up to the turn, response: the turn), from a teacher who calls the calculator in
//                  only `--tool-rate` of the episodes where it is offered and otherwise answers
//                  from memory (right: the teacher knows; the model cannot learn to multiply);
//                  besides, for `--read-results` of the tasks, the turn after a calculator's
//                  result (the result read off), as in a tool-using conversation;
//   rl.jsonl       tasks ("37*86", label "3182") for GRPO with the environment;
//   heldout.jsonl  tasks never seen in training, for the held-out success the run reports.
// The tool call is `<tool_call>{"name": "calculate", "arguments": {"expression":
// "37*86"}}</tool_call>`: the tokenizer has its opening up to the expression and its closing as one
// token each, so the model writes a call as <call> 3 7 * 8 6 </call>.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kCallOpen =
    "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"";
const std::string kCallClose = "\"}}</tool_call>";
const std::string kEnd = "<|end|>";

/// The added tokens: end of turn (eos), the roles, "tools are offered", the call's two halves.
const std::vector<std::string> kAdded = {kEnd,        "<|user|>", "<|assistant|>", "<|tool|>",
                                         "<|tools|>", kCallOpen,  kCallClose};

/// Characters: digits, operators, letters and punctuation (the tool's error messages), padded so
/// that the vocabulary is 64.
std::vector<std::string> characters() {
  std::vector<std::string> v;
  for (char c = '0'; c <= '9'; ++c) v.push_back(std::string(1, c));
  for (char c : std::string("+-*/= ")) v.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string(1, c));
  for (char c : std::string(":'().,_\"{}<>|!?")) v.push_back(std::string(1, c));
  return v;
}

/// The chat template: `<|tools|>` when tools are offered, then each message after its role token;
/// an assistant's tool call written as the model writes it.
const char* kTemplate =
    "{%- if tools -%}<|tools|>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<|user|>{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>"
    "{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}"
    "<tool_call>{\"name\": \"{{ c.function.name }}\", \"arguments\": {\"expression\": \""
    "{{ c.function.arguments.expression }}\"}}</tool_call>"
    "{%- endfor -%}{%- else -%}{{ m.content }}{%- endif -%}<|end|>"
    "{%- elif m.role == 'tool' -%}<|tool|>{{ m.content }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}";

size_t write_tokenizer(const fs::path& dir) {
  auto chars = characters();
  ojson vocab = ojson::object();
  for (size_t i = 0; i < chars.size(); ++i) vocab[chars[i]] = i;
  ojson added = ojson::array();
  for (size_t i = 0; i < kAdded.size(); ++i) {
    const size_t id = chars.size() + i;
    vocab[kAdded[i]] = id;
    added.push_back({{"id", id},
                     {"content", kAdded[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", i == 0}});
  }
  const size_t size = chars.size() + kAdded.size();
  ojson tok = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", added},
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
                 {"merges", ojson::array()}}}};
  std::ofstream(dir / "tokenizer.json") << tok.dump(2) << "\n";
  ojson cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
               {"eos_token", kEnd},
               {"pad_token", kEnd},
               {"model_max_length", 128},
               {"chat_template", kTemplate}};
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump(2) << "\n";
  return size;
}

std::string model_config(size_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                         int64_t kv_heads, int64_t eos) {
  ojson c = {{"architectures", {"Qwen3ForCausalLM"}},
             {"model_type", "qwen3"},
             {"vocab_size", ((vocab + 15) / 16) * 16},
             {"hidden_size", hidden},
             {"intermediate_size", hidden * 3},
             {"num_hidden_layers", layers},
             {"num_attention_heads", heads},
             {"num_key_value_heads", kv_heads},
             {"head_dim", hidden / heads},
             {"hidden_act", "silu"},
             {"max_position_embeddings", 128},
             {"rms_norm_eps", 1e-6},
             {"rope_theta", 10000.0},
             {"tie_word_embeddings", true},
             {"attention_bias", false},
             {"torch_dtype", "float32"},
             {"bos_token_id", eos},
             {"eos_token_id", eos}};
  return c.dump(2);
}

ojson call_message(const std::string& expression) {
  return {{"role", "assistant"},
          {"content", nullptr},
          {"tool_calls",
           {{{"id", "call_0_0"},
             {"type", "function"},
             {"function",
              {{"name", "calculate"}, {"arguments", ojson{{"expression", expression}}}}}}}}};
}

/// One demonstration as SFT lines: each assistant turn after the conversation before it. With
/// `read_result` and no call of its own, the turn that reads a calculator's result is shown too.
void write_demo(std::ofstream& out, const milesrt::llm::chat_template& tmpl, const ojson& tools,
                const std::string& question, const std::string& answer, bool use_tool,
                bool read_result) {
  milesrt::llm::chat_options o;
  o.add_generation_prompt = true;
  if (!tools.empty()) o.tools = tools;
  ojson messages = ojson::array({{{"role", "user"}, {"content", question}}});
  auto line = [&](const std::string& response) {
    auto r = tmpl.render(messages, o);
    if (!r.error.empty()) throw std::runtime_error(r.error);
    out << ojson{{"prompt", r.text}, {"response", response}, {"label", answer}}.dump() << "\n";
  };
  if (use_tool) line(kCallOpen + question + kCallClose);
  if (!use_tool) line(answer);
  if (!use_tool && !read_result) return;
  messages.push_back(call_message(question));
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_0_0"}, {"content", answer}});
  line(answer);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes the calculator-agent example's model, tokenizer and datasets"};
  std::string out = "runs/agent_calc/setup";
  int64_t lo = 10, hi = 99, sft_size = 3000, rl_size = 4000, heldout = 200, hidden = 128,
          layers = 2, heads = 4, kv_heads = 1;
  double tool_rate = 0.3, no_tools = 0.2, read_results = 1.0;
  uint64_t seed = 7;
  app.add_option("--out", out, "the folder to write");
  app.add_option("--min-operand", lo, "operands are drawn from [min, max]");
  app.add_option("--max-operand", hi, "operands are drawn from [min, max]");
  app.add_option("--sft-size", sft_size, "demonstrations");
  app.add_option("--rl-size", rl_size, "RL tasks");
  app.add_option("--heldout", heldout, "held-out tasks");
  app.add_option("--tool-rate", tool_rate, "how often the teacher calls the tool when offered");
  app.add_option("--no-tools", no_tools, "the share of demonstrations offered no tool");
  app.add_option("--read-results", read_results,
                 "the share of tasks whose turn after a calculator result is shown besides");
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--layers", layers, "layers");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--kv-heads", kv_heads, "key/value heads");
  app.add_option("--seed", seed, "seed of the data and the initial weights");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir = out;
  fs::create_directories(dir / "model");
  const size_t vocab = write_tokenizer(dir / "model");
  auto tok = milesrt::llm::tokenizer::load((dir / "model").string());
  if (!tok.tok) {
    std::cerr << "milesrt_agent_calc_make: " << tok.error << "\n";
    return 1;
  }
  auto tmpl = milesrt::llm::chat_template::from_model(*tok.tok);
  if (!tmpl.tmpl) {
    std::cerr << "milesrt_agent_calc_make: " << tmpl.error << "\n";
    return 1;
  }
  const int64_t eos = tok.tok->encode(kEnd, false).at(0);
  auto model =
      milesrt::llm::decoder::random(model_config(vocab, hidden, layers, heads, kv_heads, eos),
                                    at::kFloat, at::Device(at::kCPU), seed);
  model->save(dir / "model");

  std::mt19937_64 rng(seed);
  std::vector<std::pair<int64_t, int64_t>> all;
  for (int64_t a = lo; a <= hi; ++a)
    for (int64_t b = lo; b <= hi; ++b) all.push_back({a, b});
  std::shuffle(all.begin(), all.end(), rng);
  if (static_cast<int64_t>(all.size()) <= heldout) {
    std::cerr << "milesrt_agent_calc_make: --heldout must be smaller than the " << all.size()
              << " problems\n";
    return 2;
  }
  auto question = [](std::pair<int64_t, int64_t> p) {
    return std::to_string(p.first) + "*" + std::to_string(p.second);
  };
  auto answer = [](std::pair<int64_t, int64_t> p) { return std::to_string(p.first * p.second); };
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "calculate",
      "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}])");
  std::ofstream held(dir / "heldout.jsonl"), sft(dir / "sft.jsonl"), rl(dir / "rl.jsonl");
  for (int64_t i = 0; i < heldout; ++i)
    held << ojson{{"prompt", question(all[i])}, {"label", answer(all[i])}}.dump() << "\n";
  std::vector<std::pair<int64_t, int64_t>> pool(all.begin() + heldout, all.end());
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < sft_size; ++i) {
    const auto p = pool[i % pool.size()];
    const bool offered = u(rng) >= no_tools;
    const bool use = offered && u(rng) < tool_rate;
    const bool read = offered && u(rng) < read_results;
    write_demo(sft, *tmpl.tmpl, offered ? tools : ojson::array(), question(p), answer(p), use,
               read);
  }
  for (int64_t i = 0; i < rl_size; ++i) {
    const auto p = pool[(i * 7919) % pool.size()];
    rl << ojson{{"prompt", question(p)}, {"label", answer(p)}}.dump() << "\n";
  }
  std::cout << "milesrt_agent_calc_make: wrote " << dir.string() << " (" << pool.size()
            << " training problems, " << heldout << " held out; the teacher calls the tool in "
            << tool_rate * 100 << "% of the episodes that offer it)\n";
  return 0;
}
