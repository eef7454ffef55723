#include "actors/lib/llm/text_codec.hpp"

#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::llm {

struct text_codec::impl {
  std::shared_ptr<const llm::tokenizer> tok;
  std::optional<llm::chat_family> family;
};

text_codec::text_codec(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
text_codec::~text_codec() = default;

std::unique_ptr<text_codec> text_codec::load(const std::string& dir, const std::string& chat,
                                             std::string& error) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) {
    error = "no tokenizer.json in " + dir;
    return nullptr;
  }
  auto loaded = llm::tokenizer::load(dir);
  if (!loaded.tok) {
    error = loaded.error;
    return nullptr;
  }
  auto p = std::make_unique<impl>();
  p->tok = loaded.tok;
  if (!chat.empty()) {
    p->family = llm::parse_chat_family(chat);
    if (!p->family) {
      error = "--chat-template " + chat + ": unknown family (qwen2.5, qwen3, llama3)";
      return nullptr;
    }
  } else {
    p->family = llm::detect_chat_family(p->tok->chat_template());
  }
  return std::unique_ptr<text_codec>(new text_codec(std::move(p)));
}

std::vector<int64_t> text_codec::encode(const std::string& text) const {
  auto ids = impl_->tok->encode(text, false);
  return {ids.begin(), ids.end()};
}

std::string text_codec::decode(const std::vector<int64_t>& ids) const {
  return impl_->tok->decode(std::vector<llm::token_id>(ids.begin(), ids.end()));
}

std::string text_codec::render(const std::string& messages_json) const {
  if (!impl_->family) throw std::invalid_argument("no chat template known for this tokenizer: give --chat-template");
  llm::chat_options options;
  options.add_generation_prompt = true;
  options.bos_token = impl_->tok->bos_token();
  auto r = llm::render_chat(*impl_->family, nlohmann::ordered_json::parse(messages_json), options);
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
