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

/// The model of --model on --device in --dtype; null (the error printed) when it cannot be had.
std::unique_ptr<llm::decoder> load_model(const generate_options& opt, cli::context& ctx) {
  try {
    return llm::decoder::load(opt.model, opt.dtype == "bf16" ? at::kBFloat16 : at::kFloat,
                              at::Device(opt.device == "cuda" ? at::kCUDA : at::kCPU));
  } catch (const std::exception& e) {
    const bool torch = dynamic_cast<const c10::Error*>(&e) != nullptr;
    cli::print_error(ctx.err, "generate", (torch ? opt.model + ": " : "") + message_of(e));
    return nullptr;
  }
}

/// The engine over `model` as the options ask (stop strings through `tok`, when there is one);
/// null (the error printed, `status` set) when it cannot be made.
std::unique_ptr<engine> make_engine(const generate_options& opt, const llm::decoder& model,
                                    const text_codec* tok, cli::context& ctx,
                                    cli::exit_status& status) {
  engine_config cfg{opt.blocks, opt.block_size, opt.budget, 0, nullptr};
  if (opt.device == "cuda" && !opt.blocks_given) cfg.kv_memory_fraction = opt.kv_fraction;
  if (tok) {
    cfg.detokenize = [tok](const std::vector<int64_t>& ids) { return tok->decode(ids); };
  }
  try {
    return std::make_unique<engine>(model, cfg);
  } catch (const std::invalid_argument& e) {
    cli::print_error(
        ctx.err, "generate",
        std::string(cfg.kv_memory_fraction > 0 ? "--kv-memory-fraction: " : "--kv-blocks: ") +
            e.what());
    status = cli::exit_status::bad_input;
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "generate", message_of(e));
    status = cli::exit_status::run_failed;
  }
  return nullptr;
}

/// The input lines, each added to the engine as a request, or refused.
struct input_lines {
  std::vector<std::string> errors;  ///< per line: why it was refused, or ""
  std::vector<int64_t> samples_of;  ///< per line: n, or 0 for an error line
};

input_lines add_lines(std::istream& in, engine& eng, const text_codec* tok,
                      const std::string& tok_error, int64_t vocab) {
  input_lines lines;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    try {
      generate_request r = parse_request(line, n, tok, tok_error, vocab);
      eng.add(r);
      lines.errors.push_back("");
      lines.samples_of.push_back(r.params.n);
    } catch (const std::exception& e) {
      lines.errors.push_back("line " + std::to_string(n) + ": " + fields::message(e));
      lines.samples_of.push_back(0);
    }
  }
  return lines;
}

/// Writes each line's samples (or its error) in input order; returns whether a line had an error.
bool write_lines(std::ostream& out, const input_lines& lines, const std::vector<sample>& done,
                 const text_codec* tok) {
  std::map<std::pair<uint64_t, int64_t>, const sample*> by_key;
  for (const auto& s : done) by_key[{s.request_id, s.index}] = &s;
  bool bad = false;
  for (size_t i = 0; i < lines.errors.size(); ++i) {
    if (!lines.errors[i].empty()) {
      out << dump({{"error", lines.errors[i]}}) << "\n";
      bad = true;
      continue;
    }
    for (int64_t k = 0; k < lines.samples_of[i]; ++k) {
      const sample& s = *by_key.at({i + 1, k});
      nlohmann::json j;
      j["index"] = k;
      j["output_ids"] = s.output;
      j["logprobs"] = s.logprobs;
      if (tok) j["text"] = tok->decode(s.output);
      j["finish_reason"] = s.finish_reason;
      out << dump(j) << "\n";
    }
  }
  return bad;
}

cli::exit_status generate_command(const generate_options& opt, cli::context& ctx) {
  if (opt.device == "cuda" && !at::hasCUDA()) {
    cli::print_error(ctx.err, "generate", "--device cuda: no CUDA device is visible");
    return cli::exit_status::bad_input;
  }
  std::unique_ptr<llm::decoder> model = load_model(opt, ctx);
  if (!model) return cli::exit_status::bad_input;
  auto loaded = text_codec::load(opt.model, opt.chat, opt.bos);
  const std::unique_ptr<text_codec> tok = std::move(loaded.codec);
  const std::string& tok_error = loaded.error;
  if (!tok && !opt.chat.empty()) {
    cli::print_error(ctx.err, "generate", tok_error);
    return cli::exit_status::bad_input;
  }
  auto status = cli::exit_status::ok;
  std::unique_ptr<engine> eng = make_engine(opt, *model, tok.get(), ctx, status);
  if (!eng) return status;
  const input_lines lines =
      add_lines(std::cin, *eng, tok.get(), tok_error, model->config().vocab_size);
  std::vector<sample> done;
  try {
    done = eng->run();
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "generate", message_of(e));
    return cli::exit_status::run_failed;
  }
  const bool bad = write_lines(ctx.out, lines, done, tok.get());
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
