#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/safetensors.hpp"
#include "actors/lib/serving/engine.hpp"
#include "app/commands.hpp"
#include "app/json_fields.hpp"

namespace milesrt::app {
using namespace milesrt::llm;

namespace {

struct score_options {
  std::string model, device = "cpu", dtype = "fp32";
  int64_t chunk = 256;
};

void add_score_options(CLI::App& app, score_options& opt) {
  app.add_option("--model", opt.model, "Hugging Face model folder")->required();
  app.add_option("--device", opt.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt.dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--chunk", opt.chunk, "Tokens per vocabulary chunk")->check(CLI::PositiveNumber);
  app.footer(
      "Input:  {\"ids\": [...], \"temperature\": 1.0}   (temperature optional)\n"
      "Output: {\"logprobs\": [...], \"entropy\": [...]}, logprobs[i] = log p(ids[i+1] | "
      "ids[0..i])\nA bad line gets {\"error\": \"line N: ...\"}; the others go on.");
}

/// One input line: a token sequence to score, or the error that refused it.
struct score_line {
  std::vector<int64_t> ids;
  double temperature = 1.0;
  std::string error;
};

score_line parse_score_line(const std::string& text, size_t n, int64_t vocab) {
  score_line l;
  try {
    auto j = fields::parse_line<nlohmann::json>(text);
    if (!j.is_object() || !j.contains("ids"))
      throw std::invalid_argument("expected {\"ids\": [...]}");
    l.ids = fields::ids(j, "ids", vocab);
    if (l.ids.empty()) throw std::invalid_argument("'ids' is empty");
    l.temperature = fields::number(j, "temperature", 1.0, serving::request_limits::min_temperature,
                                   serving::request_limits::max_temperature);
  } catch (const std::exception& e) {
    l.error = "line " + std::to_string(n) + ": " + fields::message(e);
  }
  return l;
}

cli::exit_status score_command(const score_options& opt, cli::context& ctx) {
  if (opt.device == "cuda" && !at::hasCUDA()) {
    cli::print_error(ctx.err, "score", "--device cuda: no CUDA device is visible");
    return cli::exit_status::bad_input;
  }
  std::unique_ptr<decoder> model;
  try {
    model = decoder::load(opt.model, opt.dtype == "bf16" ? at::kBFloat16 : at::kFloat,
                          at::Device(opt.device == "cuda" ? at::kCUDA : at::kCPU));
  } catch (const c10::Error& e) {
    cli::print_error(ctx.err, "score", opt.model + ": " + e.what_without_backtrace());
    return cli::exit_status::bad_input;
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "score", e.what());
    return cli::exit_status::bad_input;
  }
  const int64_t vocab = model->config().vocab_size;
  // Read every line first: all valid sequences go through one packed forward.
  std::vector<score_line> lines;
  std::string text;
  for (size_t n = 1; std::getline(std::cin, text); ++n)
    lines.push_back(parse_score_line(text, n, vocab));
  std::vector<segment> segments;
  for (const auto& l : lines)
    if (l.error.empty()) segments.push_back({l.ids, 0, nullptr});
  forward_result fr;
  if (!segments.empty()) fr = model->forward(segments, {});
  bool bad = false;
  int64_t row = 0;
  for (const auto& l : lines) {
    nlohmann::json out;
    if (!l.error.empty()) {
      out["error"] = l.error;
      bad = true;
    } else {
      const int64_t n = static_cast<int64_t>(l.ids.size());
      std::vector<int64_t> targets(l.ids.begin() + 1, l.ids.end());
      auto s = model->score_rows(fr.hidden.narrow(0, row, n - 1), at::tensor(targets, at::kLong),
                                 l.temperature, opt.chunk);
      auto lp = s.logprobs.to(at::kCPU).contiguous();
      auto en = s.entropy.to(at::kCPU).contiguous();
      out["logprobs"] = std::vector<float>(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
      out["entropy"] = std::vector<float>(en.data_ptr<float>(), en.data_ptr<float>() + en.numel());
      row += n;
    }
    ctx.out << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  ctx.out.flush();
  return bad ? cli::exit_status::bad_input : cli::exit_status::ok;
}

}  // namespace

cli::command make_score_command() {
  return {"score", "Log-probs and entropies of token sequences (JSON lines on stdin)",
          [](CLI::App& app, cli::context& ctx) -> cli::runner {
            auto opt = std::make_shared<score_options>();
            add_score_options(app, *opt);
            return [opt, &ctx] { return score_command(*opt, ctx); };
          }};
}

}  // namespace milesrt::app
