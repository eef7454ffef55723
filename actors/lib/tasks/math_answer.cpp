#include "actors/lib/tasks/math_answer.hpp"

#include <cctype>
#include <cstdint>
#include <cstring>

namespace milesrt::tasks {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with(const std::string& s, size_t at, const char* prefix) {
  return s.compare(at, std::strlen(prefix), prefix) == 0;
}

/// Strips what commonly wraps an answer: spaces, $...$, \(...\), \[...\], **...**, and one
/// trailing period.
std::string unwrap(std::string s) {
  for (bool changed = true; changed;) {
    changed = false;
    std::string t = trim(s);
    if (t.size() >= 2 && t.front() == '$' && t.back() == '$')
      t = t.substr(1, t.size() - 2), changed = true;
    else if (t.size() >= 4 &&
             ((starts_with(t, 0, "\\(") && t.compare(t.size() - 2, 2, "\\)") == 0) ||
              (starts_with(t, 0, "\\[") && t.compare(t.size() - 2, 2, "\\]") == 0) ||
              (starts_with(t, 0, "**") && t.compare(t.size() - 2, 2, "**") == 0))) {
      t = t.substr(2, t.size() - 4), changed = true;
    } else if (!t.empty() && t.back() == '.') {
      t.pop_back(), changed = true;  // "42." ends a sentence
    }
    s = t;
  }
  return s;
}

/// The content of the brace group opening at s[open] == '{', or nullopt when it never closes.
std::optional<std::string> brace_group(const std::string& s, size_t open, size_t* end = nullptr) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {  // \{ and \} are literal braces
      ++i;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      if (end) *end = i + 1;
      return s.substr(open + 1, i - open - 1);
    }
  }
  return std::nullopt;
}

/// The start of the last "answer is" / "answer:" / "####" marker's value, searching lowercase.
std::optional<std::string> last_marked(const std::string& text) {
  std::string low(text.size(), ' ');
  for (size_t i = 0; i < text.size(); ++i) low[i] = lower(text[i]);
  std::optional<std::string> best;
  size_t best_at = 0;
  auto consider = [&](size_t value_at, size_t marker_at) {
    size_t eol = text.find('\n', value_at);
    std::string v = unwrap(
        text.substr(value_at, eol == std::string::npos ? std::string::npos : eol - value_at));
    if (v.empty()) return;
    if (!best || marker_at >= best_at) best = v, best_at = marker_at;
  };
  for (size_t at = low.find("answer"); at != std::string::npos; at = low.find("answer", at + 1)) {
    size_t i = at + 6;
    while (i < low.size() && (low[i] == ' ' || low[i] == '*')) ++i;  // "**Answer**:"
    if (i < low.size() && low[i] == ':') {
      ++i;
      while (i < low.size() && low[i] == '*') ++i;  // "**Answer:** 17"
      consider(i, at);
    } else if (starts_with(low, i, "is")) {
      i += 2;
      if (i < low.size() && low[i] == ':') ++i;
      if (i < low.size() && !is_space(low[i]) && low[i] != '$') continue;  // "answer isn't"
      consider(i, at);
    }
  }
  for (size_t at = low.find("####"); at != std::string::npos; at = low.find("####", at + 4)) {
    consider(at + 4, at);
  }
  return best;
}

/// The number starting at s[i] (digits with thousands separators, a decimal part, a /b), its end
/// in *end; "" when none starts there.
std::string number_at(const std::string& s, size_t i, size_t* end) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) ++j;
  // Thousands separators: groups of exactly three digits after the first group of 1-3 digits.
  if (j - i <= 3) {
    while (j + 3 < s.size() + 0 && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) &&
           is_digit(s[j + 3]) && (j + 4 >= s.size() || !is_digit(s[j + 4]))) {
      j += 4;
    }
  }
  if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
    ++j;
    while (j < s.size() && is_digit(s[j])) ++j;
  }
  if (j + 1 < s.size() && s[j] == '/' && is_digit(s[j + 1])) {
    ++j;
    while (j < s.size() && is_digit(s[j])) ++j;
  }
  *end = j;
  return s.substr(i, j - i);
}

std::optional<std::string> last_number(const std::string& text) {
  std::optional<std::string> last;
  for (size_t i = 0; i < text.size();) {
    if (!is_digit(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    std::string n = number_at(text, i, &end);
    if (i > 0 && text[i - 1] == '-' &&
        (i < 2 || !std::isalnum(static_cast<unsigned char>(text[i - 2])))) {
      n = "-" + n;
    }
    last = n;
    i = end;
  }
  return last;
}

// -- exact rational values

struct rational {
  __int128 num = 0, den = 1;
};

__int128 gcd128(__int128 a, __int128 b) {
  if (a < 0) a = -a;
  while (b != 0) {
    __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

constexpr __int128 limit = __int128(1) << 100;  // room for a cross-multiplication

/// An unsigned decimal "123", "1,234", "12.50", ".5", "5." as a rational; nullopt when not one.
std::optional<rational> parse_decimal(const std::string& s) {
  if (s.empty()) return std::nullopt;
  rational r;
  size_t i = 0, digits = 0, group = 0;
  bool point = false, commas = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (is_digit(c)) {
      if (r.num > limit / 10 || r.den > limit / 10) return std::nullopt;
      r.num = r.num * 10 + (c - '0');
      if (point) r.den *= 10;
      ++digits;
      ++group;
    } else if (c == ',' && !point) {
      // 1,234,567: the first group 1-3 digits, the others exactly 3.
      if (group == 0 || group > 3 || (commas && group != 3)) return std::nullopt;
      commas = true;
      group = 0;
    } else if (c == '.' && !point) {
      if (commas && group != 3) return std::nullopt;
      point = true;
      commas = false;
      group = 0;
    } else {
      return std::nullopt;
    }
  }
  if (digits == 0 || (commas && group != 3)) return std::nullopt;
  return r;
}

/// A signed number: decimal, a/b, \frac{a}{b} (\dfrac, \tfrac), with a leading + or -.
std::optional<rational> parse_value(std::string s) {
  // LaTeX thousands separators and spacing: 1{,}000, 1\,000, 1\!000.
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (starts_with(s, i, "{,}"))
      t += ',', i += 2;
    else if (starts_with(s, i, "\\$"))
      ++i;  // \$5
    else if (starts_with(s, i, "\\,") || starts_with(s, i, "\\!")) {
      if (starts_with(s, i, "\\,")) t += ',';
      ++i;
    } else if (!is_space(s[i]))
      t += s[i];
  }
  s = t;
  bool negative = false;
  while (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative ^= s[0] == '-';
    s.erase(0, 1);
  }
  std::optional<rational> r;
  for (const char* frac : {"\\frac", "\\dfrac", "\\tfrac"}) {
    if (!starts_with(s, 0, frac)) continue;
    size_t i = std::strlen(frac), end = 0;
    if (i >= s.size() || s[i] != '{') return std::nullopt;
    auto a = brace_group(s, i, &end);
    if (!a || end >= s.size() || s[end] != '{') return std::nullopt;
    size_t end2 = 0;
    auto b = brace_group(s, end, &end2);
    if (!b || end2 != s.size()) return std::nullopt;
    auto x = parse_value(*a), y = parse_value(*b);
    if (!x || !y || y->num == 0) return std::nullopt;
    r = rational{x->num * y->den, x->den * y->num};
    break;
  }
  if (!r) {
    size_t slash = s.find('/');
    if (slash != std::string::npos) {
      auto x = parse_decimal(s.substr(0, slash)), y = parse_value(s.substr(slash + 1));
      if (!x || !y || y->num == 0) return std::nullopt;
      r = rational{x->num * y->den, x->den * y->num};
    } else {
      r = parse_decimal(s);
    }
  }
  if (!r) return std::nullopt;
  if (r->den < 0) r->num = -r->num, r->den = -r->den;
  if (negative) r->num = -r->num;
  __int128 g = gcd128(r->num, r->den);
  if (g > 1) r->num /= g, r->den /= g;
  return r;
}

}  // namespace

std::optional<std::string> extract_answer(const std::string& text) {
  // The last \boxed or \fbox, by position.
  std::optional<std::string> boxed;
  size_t boxed_at = 0;
  for (const char* cmd : {"\\boxed", "\\fbox"}) {
    for (size_t at = text.find(cmd); at != std::string::npos; at = text.find(cmd, at + 1)) {
      size_t i = at + std::strlen(cmd);
      while (i < text.size() && text[i] == ' ') ++i;
      if (i >= text.size() || text[i] != '{') continue;
      auto content = brace_group(text, i);
      if (!content || trim(*content).empty()) continue;
      if (!boxed || at > boxed_at) boxed = unwrap(*content), boxed_at = at;
    }
  }
  if (boxed) return boxed;
  if (auto marked = last_marked(text)) return marked;
  return last_number(text);
}

bool answers_equal(const std::string& a, const std::string& b) {
  std::string x = unwrap(a), y = unwrap(b);
  // "x = 5" against "5": compare the right-hand side.
  auto rhs = [](const std::string& s) {
    size_t i = 0;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    if (i == 0 || i > 1) return s;
    while (i < s.size() && is_space(s[i])) ++i;
    return i < s.size() && s[i] == '=' ? trim(s.substr(i + 1)) : s;
  };
  if (x != y) x = rhs(x), y = rhs(y);
  auto vx = parse_value(x), vy = parse_value(y);
  if (vx && vy) return vx->num == vy->num && vx->den == vy->den;
  if (vx || vy) return false;
  return x == y;
}

math_judgement judge_math(const std::string& completion, const std::string& label) {
  math_judgement j;
  auto answer = extract_answer(completion);
  if (!answer) return j;
  j.found = true;
  std::string reference = label;
  if (label.find("\\boxed") != std::string::npos) {
    if (auto inner = extract_answer(label)) reference = *inner;
  }
  j.correct = answers_equal(*answer, reference);
  return j;
}

double math_score(const std::string& completion, const std::string& label, double correct,
                  double wrong, double no_answer) {
  auto j = judge_math(completion, label);
  return !j.found ? no_answer : j.correct ? correct : wrong;
}

}  // namespace milesrt::tasks
