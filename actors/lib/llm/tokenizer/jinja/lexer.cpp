#include "actors/lib/llm/tokenizer/jinja/lexer.hpp"

#include <cctype>
#include <cstdlib>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {
namespace {

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's unicode-escape decoding of a string literal's body, as Jinja's lexer applies it.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    auto hex = [&](size_t n) {
      if (i + n + 1 > s.size()) throw error("truncated escape in a string literal", line);
      std::string h(s.substr(i + 1, n));
      for (char x : h) {
        if (!std::isxdigit(static_cast<unsigned char>(x)))
          throw error("bad escape in a string literal", line);
      }
      i += n;
      return static_cast<char32_t>(std::strtoul(h.c_str(), nullptr, 16));
    };
    switch (c) {
      case '\n':
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        out += encode(std::u32string(1, hex(2)));
        break;
      case 'u':
        out += encode(std::u32string(1, hex(4)));
        break;
      case 'U':
        out += encode(std::u32string(1, hex(8)));
        break;
      default:
        if (c >= '0' && c <= '7')
          throw error("octal escapes in string literals are not supported", line);
        out += '\\';
        out += c;
    }
  }
  return out;
}

class lexer {
 public:
  explicit lexer(std::string_view src) : src_(normalise_newlines(src)) {}

  std::vector<token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t k = find_tag(pos_);
      std::string data = src_.substr(pos_, k == std::string::npos ? std::string::npos : k - pos_);
      if (k == std::string::npos) {
        emit_text(std::move(data));
        break;
      }
      char kind = src_[k + 1];
      char mod = k + 2 < src_.size() ? src_[k + 2] : '\0';
      int data_lines = count_newlines(data);
      if (mod == '-') {
        size_t e = data.size();
        while (e > 0 && space(data[e - 1])) --e;
        data.resize(e);
      } else if (mod != '+' && kind != '{') {
        size_t l = data.rfind('\n');
        l = l == std::string::npos ? 0 : l + 1;
        if (l > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l; i < data.size(); ++i) blank = blank && space(data[i]);
          if (blank) data.resize(l);
        }
      }
      emit_text(std::move(data));
      line_ += data_lines;
      pos_ = k + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      size_t end_start = pos_;
      if (kind == '#') {
        size_t e = src_.find("#}", pos_);
        if (e == std::string::npos) throw error("unterminated comment", line_);
        line_ += count_newlines(std::string_view(src_).substr(pos_, e - pos_));
        bool strip = e > pos_ && src_[e - 1] == '-';
        bool keep = e > pos_ && src_[e - 1] == '+';
        pos_ = e + 2;
        end_start = e;
        after_tag(strip, keep, true);
      } else {
        bool var = kind == '{';
        out_.push_back({var ? token_kind::var_begin : token_kind::block_begin, "", line_});
        size_t e = lex_tag(var);
        end_start = e;
        bool strip = src_[pos_] == '-';
        bool keep = src_[pos_] == '+';
        pos_ += (strip || keep ? 1 : 0) + 2;
        out_.push_back({var ? token_kind::var_end : token_kind::block_end, "", line_});
        after_tag(strip, keep, !var);
        if (!var) maybe_raw();
      }
      line_starting = pos_ > end_start && src_[pos_ - 1] == '\n';
    }
    out_.push_back({token_kind::eof, "", line_});
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string data) {
    if (!data.empty()) out_.push_back({token_kind::text, std::move(data), line_});
  }

  // After a tag's closing delimiter: `-` strips all whitespace, otherwise trim_blocks drops one
  // newline after a block or comment.
  void after_tag(bool strip, bool keep, bool block) {
    if (strip) {
      while (pos_ < src_.size() && space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
    } else if (block && !keep && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  // {% raw %}...{% endraw %}: the body is text as written.
  void maybe_raw() {
    size_t n = out_.size();
    if (n < 3 || out_[n - 2].kind != token_kind::name || out_[n - 2].text != "raw" ||
        out_[n - 3].kind != token_kind::block_begin) {
      return;
    }
    out_.resize(n - 3);
    for (size_t i = find_tag(pos_); i != std::string::npos; i = find_tag(i + 1)) {
      if (src_[i + 1] != '%') continue;
      size_t j = i + 2;
      bool lstrip = j < src_.size() && src_[j] == '-';
      if (lstrip || (j < src_.size() && src_[j] == '+')) ++j;
      while (j < src_.size() && space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && space(src_[j])) ++j;
      bool rstrip = j < src_.size() && src_[j] == '-';
      if (rstrip) ++j;
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, i - pos_);
      if (lstrip) {
        while (!body.empty() && space(body.back())) body.pop_back();
      }
      int body_line = line_;
      line_ += count_newlines(src_.substr(pos_, j + 2 - pos_));
      out_.push_back({token_kind::text, std::move(body), body_line});
      pos_ = j + 2;
      after_tag(rstrip, false, true);
      return;
    }
    throw error("{% raw %} without {% endraw %}", line_);
  }

  // Lexes a tag's contents up to its closing delimiter; returns the delimiter's position.
  size_t lex_tag(bool var) {
    const char* close = var ? "}}" : "%}";
    const int start_line = line_;  // an unclosed tag is reported where it opens, not at the end
    int depth = 0;  // open brackets: '}}' inside a dict literal is not the end of the tag
    while (true) {
      while (pos_ < src_.size() && space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size())
        throw error(std::string("unterminated tag: missing '") + close + "'", start_line);
      char c = src_[pos_];
      if (depth == 0) {
        if (src_.compare(pos_, 2, close) == 0) return pos_;
        if ((c == '-' || c == '+') && src_.compare(pos_ + 1, 2, close) == 0) return pos_;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t s = pos_;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        out_.push_back({token_kind::name, src_.substr(s, pos_ - s), line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : two) {
          if (src_.compare(pos_, 2, t) == 0) op = t;
        }
        if (op.size() == 1 && std::string("+-*/%~()[]{},.:|=<>").find(c) == std::string::npos) {
          throw error(std::string("unexpected character '") + c + "' in a tag", line_);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        out_.push_back({token_kind::op, op, line_});
      }
    }
  }

  void lex_number() {
    size_t s = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
        ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save = pos_++;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) {
        is_float = true;
        digits();
      } else {
        pos_ = save;
      }
    }
    std::string t;
    for (size_t i = s; i < pos_; ++i) {
      if (src_[i] != '_') t += src_[i];
    }
    out_.push_back({is_float ? token_kind::floating : token_kind::integer, t, line_});
  }

  void lex_string(char q) {
    size_t s = ++pos_;
    int start_line = line_;
    while (pos_ < src_.size() && src_[pos_] != q) {
      if (src_[pos_] == '\\') ++pos_;
      if (pos_ < src_.size() && src_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= src_.size()) throw error("unterminated string literal", start_line);
    out_.push_back({token_kind::string,
                    unescape(std::string_view(src_).substr(s, pos_ - s), start_line), start_line});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<token> out_;
};

}  // namespace

std::vector<token> lex(std::string_view source) { return lexer(source).run(); }

}  // namespace milesrt::llm::jinja
