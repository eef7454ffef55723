#pragma once
/// Text that comes from outside (a request, a remote answer, a file a user names) made safe to
/// parse, quote and serialise: UTF-8 checked or repaired, excerpts cut on a character boundary,
/// and JSON nesting bounded before a parser or a recursive walk meets it (nlohmann's parser is
/// iterative, but copying, dumping and walking a parsed value recurse once per level, so a
/// 100,000-deep value overflows the stack wherever it is touched).

#include <cstddef>
#include <string>
#include <string_view>

namespace milesrt::runtime {

/// The deepest JSON nesting accepted anywhere text from outside is parsed.
inline constexpr size_t max_json_nesting = 512;

/// True when `s` is well-formed UTF-8.
bool valid_utf8(std::string_view s);

/// `s` with every maximal invalid UTF-8 subpart replaced by U+FFFD, as Python's
/// `bytes.decode("utf-8", errors="replace")` and Rust's `String::from_utf8_lossy` do.
std::string lossy_utf8(std::string_view s);

/// At most `n` bytes of `s` for a message: repaired UTF-8, cut before a character that would
/// straddle the limit, "..." appended when cut.
std::string excerpt(std::string_view s, size_t n = 200);

/// "" when the arrays and objects of JSON `text` nest at most `limit` levels (brackets inside
/// strings do not count); otherwise a message naming the limit and the byte where it was passed.
/// Linear, no allocation: run it before parsing.
std::string json_nesting_problem(std::string_view text, size_t limit = max_json_nesting);

}  // namespace milesrt::runtime
