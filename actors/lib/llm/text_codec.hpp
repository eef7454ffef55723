#pragma once
/// Text in and out of `milesrt generate`: the model folder's tokenizer and chat template behind a
/// small interface (kept apart from the model headers).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace milesrt::llm {

class text_codec {
 public:
  /// Loads DIR/tokenizer.json (+ tokenizer_config.json). `chat` names a template family ("" =
  /// detected). Returns null with `error` set when there is no usable tokenizer.
  static std::unique_ptr<text_codec> load(const std::string& dir, const std::string& chat,
                                          std::string& error);
  ~text_codec();
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  /// The chat template's text for a JSON array of messages, with the generation prompt.
  std::string render(const std::string& messages_json) const;
  /// The end-of-sequence token id, if the tokenizer names one.
  std::optional<int64_t> eos() const;

 private:
  struct impl;
  explicit text_codec(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace milesrt::llm
