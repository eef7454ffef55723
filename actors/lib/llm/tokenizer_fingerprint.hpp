#pragma once
/// What two tokenizers must share for one model's log-probs of a token sequence to mean anything
/// to another model: the vocabulary (every id's token), which ids are special, and the special
/// tokens tokenizer_config.json names (bos_token, eos_token, ...). The teacher kind compares its
/// teacher's with the student's before scoring anything, and a remote teacher sends its own as
/// JSON (docs/kinds.md#teacher).
///
/// JSON form: {"format": "milesrt-tokenizer-fingerprint 1", "vocab": ["tok0", "tok1", null, ...]
/// (indexed by id; null for an id no token has), "special": [ids of the special added tokens,
/// ascending], "named": {"eos_token": "...", ...}}.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace milesrt::llm {

struct tokenizer_fingerprint {
  std::vector<std::optional<std::string>> vocab;  ///< by id: tokenizer.json's vocab + added tokens
  std::vector<int64_t> special;                   ///< ids of the special added tokens, ascending
  std::map<std::string, std::string> named;       ///< tokenizer_config.json's special tokens
};

/// The fingerprint of DIR's tokenizer.json (+ tokenizer_config.json). Throws
/// std::invalid_argument naming the file when there is none or it cannot be read.
tokenizer_fingerprint fingerprint_of(const std::filesystem::path& dir);

std::string to_json(const tokenizer_fingerprint& f);
/// Parses the JSON form; throws std::invalid_argument naming what is malformed.
tokenizer_fingerprint fingerprint_from_json(const std::string& text);

/// "" when `a` and `b` agree; else the first difference, naming the two sides as `a_name` and
/// `b_name`: the lowest id whose token differs (or that one side lacks), then the special ids,
/// then the named special tokens (e.g. "token 7 is 'ab' in the teacher's, 'ac' in the
/// student's").
std::string first_difference(const tokenizer_fingerprint& a, const std::string& a_name,
                             const tokenizer_fingerprint& b, const std::string& b_name);

}  // namespace milesrt::llm
