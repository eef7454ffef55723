#pragma once
/// Text in and out of `milesrt generate` and the rollout kind: the model folder's tokenizer and
/// chat template behind a small interface (kept apart from the model headers).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace milesrt::llm {

class text_codec;

/// text_codec::load's result: a codec, or why there is none.
struct text_codec_load {
  std::unique_ptr<text_codec> codec;
  std::string error;
};

class text_codec {
 public:
  /// Loads DIR/tokenizer.json (+ tokenizer_config.json). `chat_template` is a .jinja file's path
  /// ("" = the model's own: tokenizer_config.json's chat_template, else DIR/chat_template.jinja).
  /// `bos` is the BOS/EOS policy of prompts given as text: "auto", "config" or "never" (see
  /// llm::bos_policy). No codec, and the error, when there is no usable tokenizer, when the
  /// named template cannot be read or compiled (the error names the file and line), or for
  /// another `bos` word.
  static text_codec_load load(const std::string& dir, const std::string& chat_template,
                              const std::string& bos = "auto");
  ~text_codec();
  /// Ids of text as it is, no special token added (a rendered chat template's text).
  std::vector<int64_t> encode(const std::string& text) const;
  /// Ids of a prompt given as text, with the BOS/EOS the `bos` policy adds.
  std::vector<int64_t> encode_prompt(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  /// The chat template's text for a JSON array of messages. `options_json` is an object with
  /// optional "tools", "documents", "add_generation_prompt" (default true) and
  /// "chat_template_kwargs" (extra template variables such as enable_thinking). Throws
  /// std::invalid_argument naming the template and line on a template error.
  std::string render(const std::string& messages_json,
                     const std::string& options_json = "{}") const;
  /// The end-of-sequence token id, if the tokenizer names one.
  std::optional<int64_t> eos() const;

 private:
  struct impl;
  explicit text_codec(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace milesrt::llm
