// `milesrt tokenize --model DIR [--chat-template FILE.jinja] [--bos auto|config|never]`: one JSON
// object per stdin line, one JSON line out per input line:
//   {"text": "...", "add_special_tokens": false}          -> {"ids": [...]}   (true: BOS/EOS per
//   --bos)
//   {"ids": [...], "skip_special_tokens": false}           -> {"text": "..."}
//   {"messages": [...], "add_generation_prompt": true,
//    "tools": [...], "documents": [...],
//    "enable_thinking": false, ...}                        -> {"text": "...", "ids": [...]}
// With messages, every other key is passed to the template as a variable, as apply_chat_template
// passes its keyword arguments. A bad line gets {"error": "line N: ..."} and the rest go on; the
// exit status is then 2.
#include "app/tokenize_command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "app/json_fields.hpp"

namespace milesrt::app {
using namespace milesrt::llm;
namespace {

using ojson = nlohmann::ordered_json;

bool flag(const ojson& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw std::invalid_argument(std::string("'") + key + "' must be true or false");
  return it->get<bool>();
}

struct chat_source {
  std::shared_ptr<const chat_template> tmpl;
  std::string missing;  ///< why there is none
};

ojson handle(const ojson& req, const tokenizer& tok, const chat_source& chat, bos_policy bos,
             const std::string& tok_file) {
  if (!req.is_object()) throw std::invalid_argument("not a JSON object");
  if (req.contains("messages")) {
    if (!chat.tmpl) throw std::invalid_argument(chat.missing);
    chat_options o;
    o.add_generation_prompt = flag(req, "add_generation_prompt", false);
    for (auto it = req.begin(); it != req.end(); ++it) {
      if (it.key() == "tools") {
        o.tools = it.value();
      } else if (it.key() == "documents") {
        o.documents = it.value();
      } else if (it.key() != "messages" && it.key() != "add_generation_prompt") {
        o.extra[it.key()] = it.value();
      }
    }
    auto r = chat.tmpl->render(req.at("messages"), o);
    if (!r.error.empty()) throw std::invalid_argument(r.error);
    return {{"text", r.text}, {"ids", tok.encode(r.text, false)}};
  }
  if (req.contains("text")) {
    if (!req.at("text").is_string()) throw std::invalid_argument("'text' must be a string");
    const auto& text = req.at("text").get_ref<const std::string&>();
    return {{"ids", flag(req, "add_special_tokens", false) ? tok.encode_prompt(text, bos)
                                                           : tok.encode(text, false)}};
  }
  if (req.contains("ids")) {
    const auto& ids = req.at("ids");
    if (!ids.is_array()) throw std::invalid_argument("'ids' must be a list of integers");
    std::vector<token_id> v;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string name = "ids[" + std::to_string(i) + "]";
      const auto id = static_cast<token_id>(
          fields::integer(ids[i], name, 0, std::numeric_limits<token_id>::max()));
      if (!tok.id_to_token(id)) {
        throw std::invalid_argument("'" + name + "': " + std::to_string(id) +
                                    " is not a token id of " + tok_file);
      }
      v.push_back(id);
    }
    // error_handler::replace keeps the reply valid JSON should a token carry invalid UTF-8.
    return {{"text", tok.decode(v, flag(req, "skip_special_tokens", false))}};
  }
  throw std::invalid_argument("expected one of 'text', 'ids' or 'messages'");
}

}  // namespace

cli::command make_tokenize_command() {
  return {
      "tokenize", "Tokenize JSON lines from stdin with a model's tokenizer and chat template",
      [](CLI::App& app, cli::context& ctx) -> cli::runner {
        struct options {
          std::string model;
          std::string chat;
          std::string bos = "auto";
        };
        auto opt = std::make_shared<options>();
        app.add_option("--model", opt->model,
                       "Model folder with tokenizer.json (+ tokenizer_config.json)")
            ->required();
        app.add_option(
            "--chat-template", opt->chat,
            "A Jinja chat template file (default: tokenizer_config.json's chat_template, else "
            "chat_template.jinja in the model folder)");
        app.add_option(
               "--bos", opt->bos,
               "BOS/EOS of texts with add_special_tokens: auto (the model's tokenizer class "
               "convention, as transformers 4), config (tokenizer_config.json's add_bos_token / "
               "add_eos_token) or never")
            ->check(CLI::IsMember({"auto", "config", "never"}));
        return [opt, &ctx] {
          const bos_policy bos = *parse_bos_policy(opt->bos);
          auto loaded = tokenizer::load(opt->model);
          if (!loaded.tok) {
            cli::print_error(ctx.err, "tokenize", loaded.error);
            return cli::exit_status::bad_input;
          }
          chat_source chat;
          auto t = chat_template::load(opt->chat, *loaded.tok);
          if (!t.tmpl && !opt->chat.empty()) {
            cli::print_error(ctx.err, "tokenize", "--chat-template: " + t.error);
            return cli::exit_status::bad_input;
          }
          chat.tmpl = t.tmpl;
          chat.missing = !t.error.empty() ? t.error
                                          : "no chat template: " + opt->model +
                                                "/tokenizer_config.json has no chat_template "
                                                "and there is no chat_template.jinja beside it; "
                                                "pass --chat-template FILE.jinja";
          bool any_bad = false;
          std::string line;
          for (size_t n = 1; std::getline(std::cin, line); ++n) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            ojson reply;
            try {
              reply = handle(fields::parse_line<ojson>(line), *loaded.tok, chat, bos,
                             opt->model + "/tokenizer.json");
            } catch (const std::exception& e) {
              any_bad = true;
              reply = {{"error", "line " + std::to_string(n) + ": " + fields::message(e)}};
            }
            ctx.out << reply.dump(-1, ' ', false, ojson::error_handler_t::replace) << '\n';
            ctx.out.flush();
          }
          return any_bad ? cli::exit_status::bad_input : cli::exit_status::ok;
        };
      }};
}

}  // namespace milesrt::app
