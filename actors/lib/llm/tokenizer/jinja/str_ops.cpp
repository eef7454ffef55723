#include "actors/lib/llm/tokenizer/jinja/str_ops.hpp"

#include <algorithm>

namespace milesrt::llm::jinja {
namespace {

// Code points whose case Python changes but this engine does not (it maps ASCII letters only):
// Latin-1 and Latin Extended, Greek, Cyrillic, Armenian, Latin Extended Additional, Greek
// Extended, fullwidth letters, Deseret and other cased scripts.
bool non_ascii_cased(char32_t c) {
  return (c >= 0xB5 && c <= 0x58F) || (c >= 0x10A0 && c <= 0x10FF) ||
         (c >= 0x13A0 && c <= 0x13FF) || (c >= 0x1C80 && c <= 0x1CBF) ||
         (c >= 0x1D00 && c <= 0x1FFF) || (c >= 0x2C00 && c <= 0x2D2F) ||
         (c >= 0xA640 && c <= 0xA7FF) || (c >= 0xAB30 && c <= 0xABBF) ||
         (c >= 0xFB00 && c <= 0xFB17) || (c >= 0xFF21 && c <= 0xFF5A) ||
         (c >= 0x10400 && c <= 0x104FF) || (c >= 0x10C80 && c <= 0x10CFF) ||
         (c >= 0x118A0 && c <= 0x118FF) || (c >= 0x16E40 && c <= 0x16E9F) ||
         (c >= 0x1E900 && c <= 0x1E95F) || c == 0x2126 || c == 0x212A || c == 0x212B ||
         (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9);
}

std::u32string cased_text(const std::string& s, const char* op) {
  std::u32string u = decode(s);
  for (char32_t c : u) {
    if (non_ascii_cased(c)) throw error(std::string(op) + " of non-ASCII letters is not supported");
  }
  return u;
}

char32_t up(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t low(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

bool ascii(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

const std::string& str_arg(const value& v, const char* what) {
  if (!v.is_string()) throw error(std::string(what) + " needs a string, got " + type_name(v));
  return v.get_ref<const std::string&>();
}

bool is_ascii_letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string upper(const std::string& s) {
  std::u32string u = cased_text(s, "upper()");
  for (auto& c : u) c = up(c);
  return encode(u);
}
std::string lower(const std::string& s) {
  std::u32string u = cased_text(s, "lower()");
  for (auto& c : u) c = low(c);
  return encode(u);
}
std::string capitalize(const std::string& s) {
  std::u32string u = cased_text(s, "capitalize()");
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? up(u[i]) : low(u[i]);
  return encode(u);
}
// Python's str.title(): a letter after a non-letter starts a word.
std::string py_title(const std::string& s) {
  std::u32string u = cased_text(s, "title()");
  bool prev = false;
  for (auto& c : u) {
    c = prev ? low(c) : up(c);
    prev = is_ascii_letter(c);
  }
  return encode(u);
}
// Jinja's title filter: words start after runs of -, whitespace, (, {, [ or <.
std::string jinja_title(const std::string& s) {
  std::u32string u = cased_text(s, "title"), out;
  bool start = true;
  for (char32_t c : u) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
    out += sep ? c : start ? up(c) : low(c);
    start = sep;
  }
  return encode(out);
}

std::string strip(const std::string& s, const value* chars, bool left, bool right) {
  bool ws = !chars || chars->is_null();
  // Bytes suffice while the ends are ASCII (UTF-8 never puts an ASCII byte inside a code point):
  // whitespace stops at the first non-ASCII byte, which may start a Unicode space, and an ASCII
  // `chars` never matches one. Otherwise code points, as Python sees them.
  const std::string* set_bytes = ws ? nullptr : &str_arg(*chars, "strip");
  if (ws || ascii(*set_bytes)) {
    auto drop = [&](unsigned char c) {
      return ws ? is_space(c) : set_bytes->find(static_cast<char>(c)) != std::string::npos;
    };
    size_t a = 0, b = s.size();
    bool decided = true;
    if (left) {
      while (a < b && static_cast<unsigned char>(s[a]) < 0x80 &&
             drop(static_cast<unsigned char>(s[a])))
        ++a;
      decided = decided && (a == b || static_cast<unsigned char>(s[a]) < 0x80 || !ws);
    }
    if (right) {
      while (b > a && static_cast<unsigned char>(s[b - 1]) < 0x80 &&
             drop(static_cast<unsigned char>(s[b - 1])))
        --b;
      decided = decided && (b == a || static_cast<unsigned char>(s[b - 1]) < 0x80 || !ws);
    }
    if (decided) return s.substr(a, b - a);
  }
  std::u32string u = decode(s);
  std::u32string set;
  if (!ws) set = decode(*set_bytes);
  auto drop = [&](char32_t c) { return ws ? is_space(c) : set.find(c) != std::u32string::npos; };
  size_t a = 0, b = u.size();
  if (left) {
    while (a < b && drop(u[a])) ++a;
  }
  if (right) {
    while (b > a && drop(u[b - 1])) --b;
  }
  return encode(u.substr(a, b - a));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {
    std::u32string u = decode(s);
    int64_t n = 0;
    for (char32_t c : u) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += encode(std::u32string(1, c));
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t k = s.find(from, pos);
    if (k == std::string::npos) break;
    out.append(s, pos, k - pos);
    out += to;
    pos = k + from.size();
    ++n;
  }
  out.append(s, pos);
  return out;
}

value split(const std::string& s, const value* sep, const value* maxsplit_v, bool from_right) {
  int64_t maxsplit = maxsplit_v ? as_int(*maxsplit_v) : -1;
  std::vector<std::string> parts;
  if (!sep || sep->is_null()) {
    std::u32string u = decode(s);
    if (from_right) std::reverse(u.begin(), u.end());
    size_t i = 0;
    while (true) {
      while (i < u.size() && is_space(u[i])) ++i;
      if (i == u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && is_space(u[e - 1])) --e;
        parts.push_back(encode(u.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !is_space(u[j])) ++j;
      parts.push_back(encode(u.substr(i, j - i)));
      i = j;
    }
    if (from_right) {
      for (auto& p : parts) {
        std::u32string x = decode(p);
        std::reverse(x.begin(), x.end());
        p = encode(x);
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::string& d = str_arg(*sep, "split");
    if (d.empty()) throw error("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t k = s.find(d, pos);
        if (k == std::string::npos) break;
        parts.push_back(s.substr(pos, k - pos));
        pos = k + d.size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        if (end < d.size()) break;
        size_t k = s.rfind(d, end - d.size());
        if (k == std::string::npos) break;
        parts.push_back(s.substr(k + d.size(), end - k - d.size()));
        end = k;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  value r = value::array();
  for (auto& p : parts) r.push_back(std::move(p));
  return r;
}

// Python's str.splitlines().
std::vector<std::string> splitlines(const std::string& s) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
        c == 0x85 || c == 0x2028 || c == 0x2029) {
      out.push_back(encode(u.substr(start, i - start)));
      if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < u.size()) out.push_back(encode(u.substr(start)));
  return out;
}

}  // namespace milesrt::llm::jinja
