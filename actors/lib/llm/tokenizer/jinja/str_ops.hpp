#pragma once
/// Python's str operations over UTF-8 text, as the filters (filters.cpp) and the str methods
/// (methods.cpp) use them. Case changes cover ASCII letters; text with other cased letters is an
/// error rather than a wrong answer.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

/// The string `v`; throws "<what> needs a string, got <type>" for any other value.
const std::string& str_arg(const value& v, const char* what);
/// Whether `c` is an ASCII letter.
bool is_ascii_letter(char32_t c);

/// str.upper(), str.lower() and str.capitalize().
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string capitalize(const std::string& s);
/// Python's str.title(): a letter after a non-letter starts a word.
std::string py_title(const std::string& s);
/// Jinja's title filter: words start after runs of -, whitespace, (, {, [ or <.
std::string jinja_title(const std::string& s);

/// str.strip(chars), lstrip (`right` false) and rstrip (`left` false); `chars` null or None:
/// whitespace.
std::string strip(const std::string& s, const value* chars, bool left, bool right);
/// str.replace(from, to, count); `count` < 0: every occurrence.
std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count);
/// str.split(sep, maxsplit), or rsplit with `from_right`; `sep` null or None: runs of whitespace.
value split(const std::string& s, const value* sep, const value* maxsplit_v, bool from_right);
/// Python's str.splitlines().
std::vector<std::string> splitlines(const std::string& s);

}  // namespace milesrt::llm::jinja
