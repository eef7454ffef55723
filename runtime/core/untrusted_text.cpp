#include "runtime/core/untrusted_text.hpp"

namespace milesrt::runtime {
namespace {

// Length of the well-formed sequence starting at s[i], or the length of its maximal invalid
// subpart negated (Unicode 15, table 3-7: the allowed second-byte ranges per lead byte).
int sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  size_t k = i + 1;
  for (int n = 0; n < need; ++n, ++k) {
    if (k >= s.size()) return -static_cast<int>(k - i);
    const unsigned char x = b(k);
    if (n == 0 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return -static_cast<int>(k - i);
  }
  return need + 1;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = sequence(s, i);
    if (n < 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string lossy_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const int n = sequence(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

std::string excerpt(std::string_view s, size_t n) {
  if (s.size() <= n) return lossy_utf8(s);
  size_t end = n;
  // Step back over continuation bytes so that a character is kept whole or left out.
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80 && n - end < 4) --end;
  return lossy_utf8(s.substr(0, end)) + "...";
}

std::string json_nesting_problem(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is, is not the string's end
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return "JSON nested deeper than " + std::to_string(limit) + " levels (at byte " +
               std::to_string(i) + ")";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

}  // namespace milesrt::runtime
