#pragma once
/// Prompt datasets in JSON Lines: one object per line, read whole into memory. The `data` kind
/// serves them to the rollout; the trainer's evaluation reads them too.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace milesrt::tasks {

/// The JSON keys of a record's fields (DataParams' promptKey, labelKey, ...).
struct data_keys {
  std::string prompt = "prompt";
  std::string label = "label";
  std::string messages = "messages";      ///< optional: a chat, an array of {role, content}
  std::string response = "response";      ///< optional: the target completion (SFT)
  std::string prompt_ids = "prompt_ids";  ///< optional: the prompt as token ids, used as they are
};

/// One line of a dataset.
struct data_record {
  std::string prompt;         ///< "" when the record has only messages
  std::string label;          ///< the reference answer as text (a JSON number becomes its text)
  std::string messages_json;  ///< the chat as JSON text, "" when absent
  std::string response;
  std::vector<int64_t> prompt_ids;  ///< empty when absent; else the rollout skips tokenizing
};

/// Reads every non-blank line of `path`. Each record needs the prompt, the messages or the
/// prompt ids key. A missing file, a line that is not a JSON object, or a field of the wrong type
/// throws std::runtime_error naming the file (and `file:line` for a bad line) and the problem.
std::vector<data_record> load_jsonl(const std::filesystem::path& path, const data_keys& keys = {});

}  // namespace milesrt::tasks
