#pragma once
/// UTF-8 helpers for the tokenizer: lossy repair of invalid input, code point iteration, and the
/// byte <-> character table of byte-level BPE (GPT-2's `bytes_to_unicode`).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace milesrt::llm::utf8 {

/// Replaces every maximal invalid subpart of `s` with U+FFFD, as Python's
/// `bytes.decode("utf-8", errors="replace")` and Rust's `String::from_utf8_lossy` do.
std::string repair(std::string_view s);

/// True when `s` is well-formed UTF-8.
bool valid(std::string_view s);

/// Length in bytes of the character starting at s[i] (s must be valid UTF-8).
inline size_t char_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/// Appends code point `cp` encoded as UTF-8.
void append(std::string& out, char32_t cp);

/// The byte-level alphabet: byte b is written as the UTF-8 of `byte_char(b)`.
const std::array<std::string, 256>& byte_chars();

/// Maps the byte-level character starting at s[i] back to its byte; -1 when the character is not
/// part of the byte-level alphabet. Advances i past the character either way.
int char_byte(std::string_view s, size_t& i);

}  // namespace milesrt::llm::utf8
