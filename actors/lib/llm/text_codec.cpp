#include "actors/lib/llm/text_codec.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::llm {

struct text_codec::impl {
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> chat;
  std::string chat_error;  ///< why there is no chat template, said when messages come
  llm::bos_policy bos = llm::bos_policy::model;
};

text_codec::text_codec(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
text_codec::~text_codec() = default;

text_codec_load text_codec::load(const std::string& dir, const std::string& chat_template,
                                 const std::string& bos) {
  auto policy = llm::parse_bos_policy(bos);
  if (!policy) {
    return {nullptr, "bos: '" + bos + "' is not auto, config or never"};
  }
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) {
    return {nullptr, "no tokenizer.json in " + dir};
  }
  auto loaded = llm::tokenizer::load(dir);
  if (!loaded.tok) {
    return {nullptr, loaded.error};
  }
  auto p = std::make_unique<impl>();
  p->tok = loaded.tok;
  p->bos = *policy;
  auto t = llm::chat_template::load(chat_template, *p->tok);
  if (!chat_template.empty() && !t.tmpl) {
    return {nullptr, t.error};
  }
  p->chat = t.tmpl;
  // The model's own template may be broken or missing: prompts given as text or ids still work.
  p->chat_error = !t.error.empty() ? t.error
                                   : "no chat template: " + dir +
                                         "/tokenizer_config.json has no chat_template and "
                                         "there is no " +
                                         dir + "/chat_template.jinja; give a .jinja file";
  return {std::unique_ptr<text_codec>(new text_codec(std::move(p))), ""};
}

std::vector<int64_t> text_codec::encode(const std::string& text) const {
  auto ids = impl_->tok->encode(text, false);
  return {ids.begin(), ids.end()};
}

std::vector<int64_t> text_codec::encode_prompt(const std::string& text) const {
  auto ids = impl_->tok->encode_prompt(text, impl_->bos);
  return {ids.begin(), ids.end()};
}

std::string text_codec::decode(const std::vector<int64_t>& ids) const {
  return impl_->tok->decode(std::vector<llm::token_id>(ids.begin(), ids.end()));
}

std::string text_codec::render(const std::string& messages_json,
                               const std::string& options_json) const {
  if (!impl_->chat) throw std::invalid_argument(impl_->chat_error);
  auto opts = nlohmann::ordered_json::parse(options_json);
  if (!opts.is_object()) throw std::invalid_argument("chat options must be a JSON object");
  llm::chat_options options;
  options.add_generation_prompt = opts.value("add_generation_prompt", true);
  if (opts.contains("tools")) options.tools = opts["tools"];
  if (opts.contains("documents")) options.documents = opts["documents"];
  if (opts.contains("chat_template_kwargs")) options.extra = opts["chat_template_kwargs"];
  auto r = impl_->chat->render(nlohmann::ordered_json::parse(messages_json), options);
  if (!r.error.empty()) throw std::invalid_argument(r.error);
  return r.text;
}

std::optional<int64_t> text_codec::eos() const {
  if (impl_->tok->eos_token().empty()) return std::nullopt;
  auto id = impl_->tok->token_to_id(impl_->tok->eos_token());
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace milesrt::llm
