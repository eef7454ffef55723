#include "actors/lib/llm/tokenizer/pipeline.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/lib/llm/tokenizer/utf8.hpp"

#ifdef MILESRT_HAVE_ICU
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#endif

namespace milesrt::llm {
namespace {

std::string type_of(const nlohmann::json& j, const char* what) {
  if (!j.is_object() || !j.contains("type")) {
    throw std::invalid_argument(std::string(what) + ": an entry has no 'type'");
  }
  return j.at("type").get<std::string>();
}

[[noreturn]] void unsupported(const char* what, const std::string& type) {
  throw std::invalid_argument(std::string(what) + " '" + type + "' is not supported by milesrt");
}

// A Split/Replace pattern: {"Regex": "..."} or {"String": "..."} (a literal).
struct pattern {
  std::unique_ptr<regex> re;
  std::string literal;
  explicit pattern(const nlohmann::json& j) {
    if (j.contains("Regex")) {
      re = std::make_unique<regex>(j.at("Regex").get<std::string>());
    } else if (j.contains("String")) {
      literal = j.at("String").get<std::string>();
    } else {
      throw std::invalid_argument("pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
  }
  // Matches (start, end) in order; an empty literal matches nothing, as in HF.
  std::vector<std::pair<size_t, size_t>> matches(const std::string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    if (re) {
      re->find_all(s, [&](size_t a, size_t b) { out.emplace_back(a, b); });
    } else if (!literal.empty()) {
      for (size_t at = s.find(literal); at != std::string::npos;
           at = s.find(literal, at + literal.size())) {
        out.emplace_back(at, at + literal.size());
      }
    }
    return out;
  }
};

}  // namespace

// ---- normalizer ---------------------------------------------------------------------------------

struct normalizer::step {
  enum class kind { unicode, lowercase, prepend, replace } k;
  std::string form, text;
  std::unique_ptr<pattern> pat;
};

normalizer::normalizer(const nlohmann::json& j) {
  if (!j.is_null()) add(j);
}
normalizer::~normalizer() = default;

void normalizer::add(const nlohmann::json& j) {
  std::string type = type_of(j, "normalizer");
  auto s = std::make_unique<step>();
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) add(n);
    return;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
#ifndef MILESRT_HAVE_ICU
    throw std::invalid_argument("normalizer '" + type +
                                "' needs ICU, and this milesrt was built without libicu-dev");
#endif
    s->k = step::kind::unicode;
    s->form = type;
  } else if (type == "Lowercase") {
#ifndef MILESRT_HAVE_ICU
    throw std::invalid_argument(
        "normalizer 'Lowercase' needs ICU, and this milesrt was built without it");
#endif
    s->k = step::kind::lowercase;
  } else if (type == "Prepend") {
    s->k = step::kind::prepend;
    s->text = j.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    s->k = step::kind::replace;
    s->pat = std::make_unique<pattern>(j.at("pattern"));
    s->text = j.at("content").get<std::string>();
  } else {
    unsupported("normalizer", type);
  }
  steps_.push_back(std::move(s));
}

std::string normalizer::apply(std::string s) const {
  for (const auto& st : steps_) {
    switch (st->k) {
      case step::kind::unicode:
      case step::kind::lowercase: {
#ifdef MILESRT_HAVE_ICU
        bool ascii = true;
        for (unsigned char c : s) ascii = ascii && c < 0x80;
        if (ascii && st->k == step::kind::unicode) break;  // ASCII is in every normal form
        UErrorCode err = U_ZERO_ERROR;
        icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
        icu::UnicodeString r;
        if (st->k == step::kind::lowercase) {
          r = u.toLower(icu::Locale::getRoot());
        } else {
          const icu::Normalizer2* n = st->form == "NFC"    ? icu::Normalizer2::getNFCInstance(err)
                                      : st->form == "NFD"  ? icu::Normalizer2::getNFDInstance(err)
                                      : st->form == "NFKC" ? icu::Normalizer2::getNFKCInstance(err)
                                                           : icu::Normalizer2::getNFKDInstance(err);
          if (U_FAILURE(err)) throw std::runtime_error("ICU: no " + st->form + " normalizer");
          r = n->normalize(u, err);
          if (U_FAILURE(err)) throw std::runtime_error("ICU: " + st->form + " failed");
        }
        s.clear();
        r.toUTF8String(s);
#endif
        break;
      }
      case step::kind::prepend:
        if (!s.empty()) s = st->text + s;
        break;
      case step::kind::replace: {
        std::string out;
        size_t last = 0;
        for (auto [a, b] : st->pat->matches(s)) {
          out.append(s, last, a - last);
          out += st->text;
          last = b;
        }
        out.append(s, last, std::string::npos);
        s = std::move(out);
        break;
      }
    }
  }
  return s;
}

// ---- pre-tokenizer ------------------------------------------------------------------------------

struct pre_tokenizer::step {
  enum class kind { split, byte_level } k;
  std::unique_ptr<pattern> pat;
  std::string behavior = "Isolated";
  bool invert = false;
  bool add_prefix_space = false;
  bool use_regex = false;
};

pre_tokenizer::pre_tokenizer(const nlohmann::json& j) {
  if (!j.is_null()) add(j);
}
pre_tokenizer::~pre_tokenizer() = default;

void pre_tokenizer::add(const nlohmann::json& j) {
  std::string type = type_of(j, "pre_tokenizer");
  auto s = std::make_unique<step>();
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers")) add(p);
    return;
  }
  if (type == "Split") {
    s->k = step::kind::split;
    s->pat = std::make_unique<pattern>(j.at("pattern"));
    s->behavior = j.at("behavior").get<std::string>();
    s->invert = j.value("invert", false);
    static const char* known[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    bool ok = false;
    for (const char* b : known) ok = ok || s->behavior == b;
    if (!ok)
      throw std::invalid_argument("pre_tokenizer Split: unknown behavior '" + s->behavior + "'");
  } else if (type == "ByteLevel") {
    s->k = step::kind::byte_level;
    s->add_prefix_space = j.value("add_prefix_space", true);
    s->use_regex = j.value("use_regex", true);
    if (s->use_regex) {
      s->pat = std::make_unique<pattern>(nlohmann::json{
          {"Regex",
           R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}});
    }
  } else if (type == "Digits") {
    // HF splits on char::is_numeric, i.e. \p{N}: runs merged, or each digit alone.
    s->k = step::kind::split;
    s->pat = std::make_unique<pattern>(nlohmann::json{{"Regex", "\\p{N}"}});
    s->behavior = j.value("individual_digits", false) ? "Isolated" : "Contiguous";
  } else {
    unsupported("pre_tokenizer", type);
  }
  steps_.push_back(std::move(s));
}

namespace {

// NormalizedString::split of HF: the matches cover the text; the behavior merges or drops them.
void split_piece(const std::string& text, const std::vector<std::pair<size_t, size_t>>& found,
                 const std::string& behavior, bool invert, std::vector<std::string>& out) {
  struct span {
    size_t a, b;
    bool match;
  };
  std::vector<span> all;
  if (text.empty()) return;
  size_t prev = 0;
  for (auto [a, b] : found) {
    if (prev != a) all.push_back({prev, a, invert});
    all.push_back({a, b, !invert});
    prev = b;
  }
  if (prev != text.size()) all.push_back({prev, text.size(), invert});
  std::vector<span> keep;  // `match` now means "remove"
  if (behavior == "Isolated") {
    for (auto s : all) keep.push_back({s.a, s.b, false});
  } else if (behavior == "Removed") {
    keep = all;
  } else if (behavior == "Contiguous") {
    bool previous = false;
    for (auto s : all) {
      if (s.match == previous && !keep.empty()) {
        keep.back().b = s.b;
      } else {
        keep.push_back({s.a, s.b, false});
      }
      previous = s.match;
    }
  } else if (behavior == "MergedWithPrevious") {
    bool previous = false;
    for (auto s : all) {
      if (s.match && !previous && !keep.empty()) {
        keep.back().b = s.b;
      } else {
        keep.push_back({s.a, s.b, false});
      }
      previous = s.match;
    }
  } else {  // MergedWithNext
    bool previous = false;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (it->match && !previous && !keep.empty()) {
        keep.back().a = it->a;
      } else {
        keep.push_back({it->a, it->b, false});
      }
      previous = it->match;
    }
    std::reverse(keep.begin(), keep.end());
  }
  for (auto s : keep) {
    if (!s.match && s.b > s.a) out.push_back(text.substr(s.a, s.b - s.a));
  }
}

}  // namespace

void pre_tokenizer::apply(const std::string& text, std::vector<std::string>& out) const {
  if (text.empty()) return;  // HF: no piece at all, not even a ByteLevel prefix space
  std::vector<std::string> pieces{text}, next;
  for (const auto& st : steps_) {
    next.clear();
    for (auto& p : pieces) {
      if (st->k == step::kind::split) {
        split_piece(p, st->pat->matches(p), st->behavior, st->invert, next);
        continue;
      }
      if (st->add_prefix_space && (p.empty() || p[0] != ' ')) p.insert(p.begin(), ' ');
      std::vector<std::string> words;
      if (st->use_regex) {
        split_piece(p, st->pat->matches(p), "Isolated", false, words);
      } else if (!p.empty()) {
        words.push_back(std::move(p));
      }
      const auto& chars = utf8::byte_chars();
      for (const auto& w : words) {
        std::string mapped;
        mapped.reserve(w.size() * 2);
        for (unsigned char c : w) mapped += chars[c];
        next.push_back(std::move(mapped));
      }
    }
    pieces.swap(next);
  }
  for (auto& p : pieces) {
    if (!p.empty()) out.push_back(std::move(p));
  }
}

// ---- post-processor -----------------------------------------------------------------------------

post_processor::post_processor(const nlohmann::json& j) {
  if (!j.is_null()) add(j);
}

void post_processor::add(const nlohmann::json& j) {
  std::string type = type_of(j, "post_processor");
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) add(p);
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_.push_back(j.at("cls").at(1).get<token_id>());
    suffix_.insert(suffix_.begin(), j.at("sep").at(1).get<token_id>());
  } else if (type == "TemplateProcessing") {
    const auto& specials = j.at("special_tokens");
    bool seen_sequence = false;
    std::vector<token_id> pre, post;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        if (item.at("Sequence").at("id").get<std::string>() != "A") {
          throw std::invalid_argument("post_processor TemplateProcessing: single names sequence B");
        }
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        std::string name = item.at("SpecialToken").at("id").get<std::string>();
        if (!specials.contains(name)) {
          throw std::invalid_argument("post_processor TemplateProcessing: special token '" + name +
                                      "' missing from special_tokens");
        }
        for (const auto& id : specials.at(name).at("ids")) {
          (seen_sequence ? post : pre).push_back(id.get<token_id>());
        }
      } else {
        throw std::invalid_argument("post_processor TemplateProcessing: unknown item " +
                                    item.dump());
      }
    }
    prefix_.insert(prefix_.end(), pre.begin(), pre.end());
    suffix_.insert(suffix_.begin(), post.begin(), post.end());
  } else {
    unsupported("post_processor", type);
  }
}

std::vector<token_id> post_processor::apply(const std::vector<token_id>& ids) const {
  std::vector<token_id> out(prefix_);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

// ---- decoder ------------------------------------------------------------------------------------

struct token_decoder::step {
  std::string type;
  std::unique_ptr<pattern> pat;
  std::string content;
  size_t start = 0, stop = 0;
};

token_decoder::token_decoder(const nlohmann::json& j) {
  if (!j.is_null()) {
    none_ = false;
    add(j);
  }
}
token_decoder::~token_decoder() = default;

void token_decoder::add(const nlohmann::json& j) {
  std::string type = type_of(j, "decoder");
  if (type == "Sequence") {
    for (const auto& d : j.at("decoders")) add(d);
    return;
  }
  auto s = std::make_unique<step>();
  s->type = type;
  if (type == "Replace") {
    s->pat = std::make_unique<pattern>(j.at("pattern"));
    s->content = j.at("content").get<std::string>();
  } else if (type == "Strip") {
    s->content = j.at("content").get<std::string>();
    s->start = j.value("start", size_t{0});
    s->stop = j.value("stop", size_t{0});
  } else if (type != "ByteLevel" && type != "ByteFallback" && type != "Fuse") {
    unsupported("decoder", type);
  }
  steps_.push_back(std::move(s));
}

std::string token_decoder::apply(std::vector<std::string> tokens) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const auto& st : steps_) {
    std::vector<std::string> next;
    if (st->type == "ByteLevel") {
      std::string bytes;
      for (const auto& t : tokens) {
        std::string mapped;
        bool ok = true;
        for (size_t i = 0; i < t.size() && ok;) {
          int b = utf8::char_byte(t, i);
          if (b < 0)
            ok = false;
          else
            mapped += static_cast<char>(b);
        }
        bytes += ok ? mapped : t;
      }
      next.push_back(utf8::repair(bytes));
    } else if (st->type == "ByteFallback") {
      std::string pending;
      auto flush = [&] {
        if (pending.empty()) return;
        if (utf8::valid(pending)) {
          next.push_back(pending);
        } else {
          std::string r;
          for (size_t i = 0; i < pending.size(); ++i) r += "\xEF\xBF\xBD";
          next.push_back(r);
        }
        pending.clear();
      };
      for (const auto& t : tokens) {
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
            std::isxdigit(static_cast<unsigned char>(t[3])) &&
            std::isxdigit(static_cast<unsigned char>(t[4]))) {
          pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
        } else {
          flush();
          next.push_back(t);
        }
      }
      flush();
    } else if (st->type == "Fuse") {
      std::string all;
      for (const auto& t : tokens) all += t;
      next.push_back(all);
    } else if (st->type == "Replace") {
      for (const auto& t : tokens) {
        std::string out;
        size_t last = 0;
        for (auto [a, b] : st->pat->matches(t)) {
          out.append(t, last, a - last);
          out += st->content;
          last = b;
        }
        out.append(t, last, std::string::npos);
        next.push_back(out);
      }
    } else {  // Strip
      for (const auto& t : tokens) {
        size_t a = 0, b = t.size(), n = st->content.size();
        for (size_t k = 0; k < st->start && n && t.compare(a, n, st->content) == 0; ++k) a += n;
        for (size_t k = 0; k < st->stop && n && b >= a + n && t.compare(b - n, n, st->content) == 0;
             ++k)
          b -= n;
        next.push_back(t.substr(a, b - a));
      }
    }
    tokens.swap(next);
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace milesrt::llm
