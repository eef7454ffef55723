#pragma once
/// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for the tokenizer's
/// pre-tokenizers, normalizers and added-token rules. Immutable once built; safe to share between
/// threads.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace milesrt::llm {

class regex {
 public:
  /// Compiles `pattern` (Oniguruma/HF syntax: \p{L}, (?i:...), (?!...) mean the same in PCRE2).
  /// Throws std::invalid_argument with PCRE2's message and offset when it does not compile.
  explicit regex(const std::string& pattern);
  ~regex();
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;

  /// Calls `on_match(start, end)` for each non-overlapping match in `text` (valid UTF-8), left to
  /// right; an empty match moves the search on by one character, as HF's find_iter does.
  void find_all(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

  /// True when the pattern matches somewhere in `text`.
  bool search(std::string_view text) const;

  /// The pattern as given.
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace milesrt::llm
