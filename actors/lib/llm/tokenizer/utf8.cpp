#include "actors/lib/llm/tokenizer/utf8.hpp"

#include <vector>

#include "runtime/core/untrusted_text.hpp"

namespace milesrt::llm::utf8 {

bool valid(std::string_view s) { return runtime::valid_utf8(s); }

std::string repair(std::string_view s) { return runtime::lossy_utf8(s); }

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {
// GPT-2's table: printable Latin-1 bytes stand for themselves, the others for 256, 257, ...
std::array<char32_t, 256> make_byte_code_points() {
  std::array<char32_t, 256> cps{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cps[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return cps;
}
const std::array<char32_t, 256>& byte_code_points() {
  static const std::array<char32_t, 256> cps = make_byte_code_points();
  return cps;
}
}  // namespace

const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> out;
    for (size_t b = 0; b < 256; ++b) append(out[b], byte_code_points()[b]);
    return out;
  }();
  return chars;
}

int char_byte(std::string_view s, size_t& i) {
  static const std::vector<int> reverse = [] {
    std::vector<int> r(324, -1);
    for (int b = 0; b < 256; ++b) r[byte_code_points()[static_cast<size_t>(b)]] = b;
    return r;
  }();
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = char_len(c);
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
  i += n;
  return cp < reverse.size() ? reverse[cp] : -1;
}

}  // namespace milesrt::llm::utf8
