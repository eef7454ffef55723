// `milesrt generate`: the rollout engine on JSON lines, all input lines batched together.
#include "app/generate_command.hpp"

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/serving/engine.hpp"
#include "app/json_fields.hpp"

namespace milesrt::app {
using namespace milesrt::llm;
using namespace milesrt::serving;

namespace {

struct generate_options {
  std::string model, device = "cpu", dtype = "fp32", chat, bos = "auto";
  int64_t blocks = 1024, block_size = 16, budget = 8192;
  double kv_fraction = 0.9;
  bool blocks_given = false;
};

CLI::Option* add_generate_options(CLI::App& app, generate_options& opt) {
  app.add_option("--model", opt.model, "Hugging Face model folder")->required();
  app.add_option("--device", opt.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt.dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option(
      "--chat-template", opt.chat,
      "A Jinja chat template file (default: the model's own, from tokenizer_config.json or "
      "chat_template.jinja)");
  app.add_option("--bos", opt.bos,
                 "BOS/EOS of text prompts: auto (the model's tokenizer class convention), config "
                 "(tokenizer_config.json's add_bos_token / add_eos_token) or never; chat prompts "
                 "get their template's")
      ->check(CLI::IsMember({"auto", "config", "never"}));
  auto* blocks = app.add_option("--kv-blocks", opt.blocks,
                                "KV cache blocks (default: cpu 1024, cuda by memory fraction)")
                     ->check(CLI::PositiveNumber);
  app.add_option(
         "--kv-memory-fraction", opt.kv_fraction,
         "cuda: the KV pool's share of the free GPU memory (default 0.9; --kv-blocks overrides)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--block-size", opt.block_size, "Tokens per KV block")->check(CLI::PositiveNumber);
  app.add_option("--step-tokens", opt.budget, "Tokens per engine step")->check(CLI::PositiveNumber);
  app.footer(
      "Input: {\"prompt_ids\": [...]} or {\"prompt\": \"text\"} or {\"messages\": [...]} (with "
      "optional\n"
      "  tools, documents, chat_template_kwargs such as {\"enable_thinking\": false}), plus "
      "optional\n"
      "  max_new_tokens (16), temperature (1.0), top_p, top_k, n, seed, stop (strings), "
      "stop_token_ids,\n"
      "  ignore_eos. Output, one line per sample: {\"index\", \"output_ids\", \"logprobs\", "
      "\"text\",\n"
      "  \"finish_reason\"}. logprobs are at the sampling temperature over the full vocabulary.");
  return blocks;
}

/// One input line as a request (throws naming the field that is wrong).
generate_request parse_request(const std::string& line, size_t n, const text_codec* tok,
                               const std::string& tok_error, int64_t vocab) {
  auto j = fields::parse_line<nlohmann::ordered_json>(line);
  if (!j.is_object()) throw std::invalid_argument("expected a JSON object");
  generate_request r;
  r.id = n;
  if (j.contains("prompt_ids")) {
    r.prompt = fields::ids(j, "prompt_ids", vocab);
  } else if (j.contains("prompt") || j.contains("messages")) {
    if (!tok) throw std::invalid_argument(tok_error);
    nlohmann::ordered_json chat_opts = nlohmann::ordered_json::object();
    for (const char* k : {"tools", "documents", "chat_template_kwargs"}) {
      if (j.contains(k)) chat_opts[k] = j[k];
    }
    if (j.contains("messages") && !j["messages"].is_array()) {
      throw std::invalid_argument("'messages' must be a list of messages, got " +
                                  fields::quote(j["messages"]));
    }
    r.prompt = j.contains("messages")
                   ? tok->encode(tok->render(j["messages"].dump(), chat_opts.dump()))
                   : tok->encode_prompt(fields::string(j, "prompt"));
  } else {
    throw std::invalid_argument("expected prompt_ids, prompt or messages");
  }
  using limits = request_limits;
  r.params.max_new_tokens = fields::integer(j, "max_new_tokens", 16, 1, limits::max_new_tokens);
  r.params.temperature =
      fields::number(j, "temperature", 1.0, limits::min_temperature, limits::max_temperature);
  r.params.top_p = fields::number(j, "top_p", 1.0, 0.0, 1.0, true);
  r.params.top_k = fields::integer(j, "top_k", 0, 0, limits::max_top_k);
  r.params.n = fields::integer(j, "n", 1, 1, limits::max_n);
  r.params.seed = fields::seed(j, "seed");
  if (j.contains("stop_token_ids"))
    r.params.stop_token_ids = fields::ids(j, "stop_token_ids", vocab);
  if (j.contains("stop")) r.params.stop_strings = fields::strings(j, "stop");
  if (tok && !fields::boolean(j, "ignore_eos", false) && tok->eos()) {
    r.params.stop_token_ids.push_back(*tok->eos());
  }
  return r;
}

/// A JSON line out; text that is not valid UTF-8 (a token's bytes, a quoted input) is replaced.
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// An exception's message without libtorch's stack-trace frames.
std::string message_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

cli::exit_status generate_command(const generate_options& opt, cli::context& ctx) {
  if (opt.device == "cuda" && !at::hasCUDA()) {
    cli::print_error(ctx.err, "generate", "--device cuda: no CUDA device is visible");
    return cli::exit_status::bad_input;
  }
  std::unique_ptr<llm::decoder> model;
  try {
    model = llm::decoder::load(opt.model, opt.dtype == "bf16" ? at::kBFloat16 : at::kFloat,
                               at::Device(opt.device == "cuda" ? at::kCUDA : at::kCPU));
  } catch (const std::exception& e) {
    const bool torch = dynamic_cast<const c10::Error*>(&e) != nullptr;
    cli::print_error(ctx.err, "generate", (torch ? opt.model + ": " : "") + message_of(e));
    return cli::exit_status::bad_input;
  }
  std::string tok_error;
  auto tok = text_codec::load(opt.model, opt.chat, tok_error, opt.bos);
  if (!tok && !opt.chat.empty()) {
    cli::print_error(ctx.err, "generate", tok_error);
    return cli::exit_status::bad_input;
  }
  engine_config cfg{opt.blocks, opt.block_size, opt.budget, 0, nullptr};
  if (opt.device == "cuda" && !opt.blocks_given) cfg.kv_memory_fraction = opt.kv_fraction;
  if (tok) {
    auto* codec = tok.get();
    cfg.detokenize = [codec](const std::vector<int64_t>& ids) { return codec->decode(ids); };
  }
  std::unique_ptr<engine> eng;
  try {
    eng = std::make_unique<engine>(*model, cfg);
  } catch (const std::invalid_argument& e) {
    cli::print_error(
        ctx.err, "generate",
        std::string(cfg.kv_memory_fraction > 0 ? "--kv-memory-fraction: " : "--kv-blocks: ") +
            e.what());
    return cli::exit_status::bad_input;
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "generate", message_of(e));
    return cli::exit_status::run_failed;
  }
  const int64_t vocab = model->config().vocab_size;
  std::vector<std::string> errors;
  std::vector<int64_t> samples_of;  // per line: n, or 0 for an error line
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    try {
      generate_request r = parse_request(line, n, tok.get(), tok_error, vocab);
      eng->add(r);
      errors.push_back("");
      samples_of.push_back(r.params.n);
    } catch (const std::exception& e) {
      errors.push_back("line " + std::to_string(n) + ": " + fields::message(e));
      samples_of.push_back(0);
    }
  }
  std::vector<sample> done;
  try {
    done = eng->run();
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "generate", message_of(e));
    return cli::exit_status::run_failed;
  }
  std::map<std::pair<uint64_t, int64_t>, const sample*> by_key;
  for (const auto& s : done) by_key[{s.request_id, s.index}] = &s;
  bool bad = false;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) {
      ctx.out << dump({{"error", errors[i]}}) << "\n";
      bad = true;
      continue;
    }
    for (int64_t k = 0; k < samples_of[i]; ++k) {
      const sample& s = *by_key.at({i + 1, k});
      nlohmann::json out;
      out["index"] = k;
      out["output_ids"] = s.output;
      out["logprobs"] = s.logprobs;
      if (tok) out["text"] = tok->decode(s.output);
      out["finish_reason"] = s.finish_reason;
      ctx.out << dump(out) << "\n";
    }
  }
  return bad ? cli::exit_status::bad_input : cli::exit_status::ok;
}

}  // namespace

cli::command make_generate_command() {
  return {"generate", "Sample completions with the rollout engine (JSON lines on stdin)",
          [](CLI::App& app, cli::context& ctx) -> cli::runner {
            auto opt = std::make_shared<generate_options>();
            auto* blocks = add_generate_options(app, *opt);
            return [opt, &ctx, blocks] {
              opt->blocks_given = blocks->count() > 0;
              return generate_command(*opt, ctx);
            };
          }};
}

}  // namespace milesrt::app
