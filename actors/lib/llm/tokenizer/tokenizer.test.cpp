// Unit tests of the tokenizer's parts on small hand-written tokenizer.json files; the id-for-id
// comparison with HF on a real-size tokenizer is test/tokenizer_oracle.test.cpp.
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/utf8.hpp"

namespace milesrt::llm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

fs::path write_dir(const std::string& name, const json& tj) {
  fs::path d =
      fs::temp_directory_path() / ("milesrt-tok-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(d);
  std::ofstream(d / "tokenizer.json") << tj.dump();
  return d;
}

// A tiny non-byte-level BPE: letters a-d, merges ab, abc, byte fallback tokens for 0xC3 0xA9.
json tiny(bool legacy_merges) {
  json vocab = {{"<unk>", 0}, {"a", 1},      {"b", 2},      {"c", 3},  {"d", 4}, {"ab", 5},
                {"abc", 6},   {"<0xC3>", 7}, {"<0xA9>", 8}, {"cd", 9}, {" ", 10}};
  json merges = legacy_merges ? json{"a b", "ab c", "c d"}
                              : json::array({json::array({"a", "b"}), json::array({"ab", "c"}),
                                             json::array({"c", "d"})});
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Split"},
            {"pattern", {{"String", " "}}},
            {"behavior", "Isolated"},
            {"invert", false}}},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", merges},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", true}}}};
}

TEST(Utf8, RepairReplacesMaximalSubparts) {
  EXPECT_EQ(utf8::repair("ok"), "ok");
  EXPECT_EQ(utf8::repair("a\xff"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(utf8::repair("\xe4\xb8"), "\xEF\xBF\xBD");  // truncated: one
  EXPECT_EQ(utf8::repair("\xed\xa0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");                // surrogate: three
  EXPECT_EQ(utf8::repair("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_FALSE(utf8::valid("\xf4\x90\x80\x80"));
  EXPECT_TRUE(utf8::valid("\xf4\x8f\xbf\xbf"));
}

TEST(Utf8, ByteLevelTableRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const std::string& c = utf8::byte_chars()[static_cast<size_t>(b)];
    size_t i = 0;
    EXPECT_EQ(utf8::char_byte(c, i), b);
    EXPECT_EQ(i, c.size());
  }
  EXPECT_EQ(utf8::byte_chars()[' '], "\xC4\xA0");  // "Ġ"
}

TEST(Bpe, MergesInBothFormsGiveTheSameIds) {
  for (bool legacy : {true, false}) {
    auto r = tokenizer::load(write_dir(legacy ? "legacy" : "pairs", tiny(legacy)));
    ASSERT_TRUE(r.tok) << r.error;
    EXPECT_EQ(r.tok->encode("abc abcd"), (std::vector<token_id>{6, 10, 6, 4}));
    EXPECT_EQ(r.tok->encode("cd ab"), (std::vector<token_id>{9, 10, 5}));
  }
}

TEST(Bpe, ByteFallbackAndFusedUnknowns) {
  auto r = tokenizer::load(write_dir("fallback", tiny(true)));
  ASSERT_TRUE(r.tok) << r.error;
  // é = C3 A9 falls back to bytes; z and y have no byte tokens: one fused <unk>.
  EXPECT_EQ(r.tok->encode("a\xc3\xa9zyb"), (std::vector<token_id>{1, 7, 8, 0, 2}));
  EXPECT_EQ(r.tok->decode({1, 7, 8, 2}),
            "a\xc3\xa9"
            "b");
  EXPECT_EQ(r.tok->decode({7, 1}),
            "\xEF\xBF\xBD"
            "a");  // a lone byte token decodes to U+FFFD
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json tj = tiny(true);
  tj["model"]["merges"] = json{"a b"};  // "abc" cannot be reached by merges...
  EXPECT_EQ(tokenizer::load(write_dir("noignore", tj)).tok->encode("abc"),
            (std::vector<token_id>{5, 3}));
  tj["model"]["ignore_merges"] = true;  // ...but is a vocabulary word
  EXPECT_EQ(tokenizer::load(write_dir("ignore", tj)).tok->encode("abc"),
            (std::vector<token_id>{6}));
}

TEST(Pipeline, SplitBehaviors) {
  json tj = tiny(true);
  tj["model"]["byte_fallback"] = false;
  tj["model"]["vocab"]["-"] = 11;
  auto enc = [&](const std::string& behavior, bool invert, const std::string& text) {
    tj["pre_tokenizer"] = {{"type", "Split"},
                           {"pattern", {{"String", "-"}}},
                           {"behavior", behavior},
                           {"invert", invert}};
    auto r = tokenizer::load(write_dir("split-" + behavior, tj));
    EXPECT_TRUE(r.tok) << r.error;
    return r.tok->encode(text);
  };
  // ab-c: Isolated [ab][-][c]; Removed [ab][c]; MergedWithPrevious [ab-][c] = ab - c (no merge
  // crosses the dash); MergedWithNext [ab][-c].
  EXPECT_EQ(enc("Isolated", false, "ab-c"), (std::vector<token_id>{5, 11, 3}));
  EXPECT_EQ(enc("Removed", false, "ab-c"), (std::vector<token_id>{5, 3}));
  EXPECT_EQ(enc("Removed", true, "ab-c"), (std::vector<token_id>{11}));
  EXPECT_EQ(enc("Contiguous", false, "a--b"), (std::vector<token_id>{1, 11, 11, 2}));
  EXPECT_EQ(enc("MergedWithNext", false, "ab-c"), (std::vector<token_id>{5, 11, 3}));
}

TEST(Tokenizer, UnsupportedComponentsAreNamed) {
  json tj = tiny(true);
  tj["pre_tokenizer"] = {{"type", "Metaspace"}};
  auto r = tokenizer::load(write_dir("meta", tj));
  EXPECT_FALSE(r.tok);
  EXPECT_NE(
      r.error.find("tokenizer.json: pre_tokenizer: pre_tokenizer 'Metaspace' is not supported"),
      std::string::npos)
      << r.error;
  tj = tiny(true);
  tj["model"]["merges"] = json{"a zz"};
  r = tokenizer::load(write_dir("badmerge", tj));
  EXPECT_NE(
      r.error.find(
          "model: model BPE: merge 1 ('a', 'zz') names a token that is not in the vocabulary"),
      std::string::npos)
      << r.error;
  tj = tiny(true);
  tj["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  r = tokenizer::load(write_dir("badregex", tj));
  EXPECT_NE(r.error.find("regex /(unclosed/ does not compile"), std::string::npos) << r.error;
  r = tokenizer::load(fs::temp_directory_path() / "milesrt-no-such-model");
  EXPECT_NE(r.error.find("tokenizer.json: cannot open"), std::string::npos) << r.error;
}

// tokenizer_config.json's add_bos_token / add_eos_token change nothing (transformers 5 drops them
// when tokenizer.json exists; the oracle's BosEosOracle checks this against AutoTokenizer): BOS and
// EOS come from tokenizer.json's post_processor alone. bos_token / eos_token may be strings or
// AddedToken objects.
TEST(Tokenizer, ConfigBosEosFlagsLeaveThePostProcessorAlone) {
  json tj = tiny(true);
  tj["added_tokens"] = {{{"id", 11}, {"content", "<s>"}, {"special", true}},
                        {{"id", 12}, {"content", "</s>"}, {"special", true}}};
  json with_bos = tj;
  with_bos["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {11}}, {"tokens", {"<s>"}}}}}}};
  json added_token = {{"__type", "AddedToken"}, {"content", "</s>"}, {"lstrip", false},
                      {"normalized", true},     {"rstrip", false},   {"single_word", false},
                      {"special", true}};
  for (bool template_bos : {false, true}) {
    for (bool add_bos : {false, true}) {
      for (bool add_eos : {false, true}) {
        std::string name = "flags-" + std::to_string(template_bos) + std::to_string(add_bos) +
                           std::to_string(add_eos);
        fs::path d = write_dir(name, template_bos ? with_bos : tj);
        json cfg = {{"tokenizer_class", "LlamaTokenizerFast"},
                    {"add_bos_token", add_bos},
                    {"add_eos_token", add_eos},
                    {"bos_token", "<s>"},
                    {"eos_token", added_token}};
        std::ofstream(d / "tokenizer_config.json") << cfg.dump();
        auto r = tokenizer::load(d);
        ASSERT_TRUE(r.tok) << r.error;
        EXPECT_EQ(r.tok->bos_token(), "<s>");
        EXPECT_EQ(r.tok->eos_token(), "</s>");
        auto want = template_bos ? std::vector<token_id>{11, 6, 9} : std::vector<token_id>{6, 9};
        EXPECT_EQ(r.tok->encode("abccd", true), want) << name;
        EXPECT_EQ(r.tok->encode("abccd", false), (std::vector<token_id>{6, 9})) << name;
      }
    }
  }
}

// Where a model's chat template comes from: tokenizer_config.json's chat_template as a string or
// as the named list (its "default" entry), else chat_template.jinja beside it; the template sees
// the config's special tokens, and keyword arguments override them.
TEST(ChatTemplate, FromTheConfigOrTheFileBesideIt) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}{{ flag | default('-') }}";
  ordered_json msgs = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  chat_options o;
  o.add_generation_prompt = true;
  auto make = [&](const std::string& name, const json& cfg, const char* beside) {
    fs::path d = write_dir(name, tiny(true));
    if (!cfg.is_null()) std::ofstream(d / "tokenizer_config.json") << cfg.dump();
    if (beside != nullptr) std::ofstream(d / "chat_template.jinja") << beside;
    auto r = tokenizer::load(d);
    EXPECT_TRUE(r.tok) << r.error;
    return r.tok;
  };
  json specials = {{"bos_token", "<s>"},
                   {"eos_token", {{"__type", "AddedToken"}, {"content", "</s>"}}}};
  json as_string = specials;
  as_string["chat_template"] = tmpl;
  json as_list = specials;
  as_list["chat_template"] = {{{"name", "tool_use"}, {"template", "TOOLS"}},
                              {{"name", "default"}, {"template", tmpl}}};
  for (const auto& [name, cfg, beside] :
       {std::tuple<std::string, json, const char*>{"ct-string", as_string, "NOT ME"},
        {"ct-list", as_list, nullptr},
        {"ct-beside", specials, tmpl.c_str()}}) {
    auto tok = make(name, cfg, beside);
    ASSERT_TRUE(tok);
    auto t = chat_template::from_model(*tok);
    ASSERT_TRUE(t.tmpl) << name << ": " << t.error;
    auto r = t.tmpl->render(msgs, o);
    EXPECT_EQ(r.error, "") << name;
    EXPECT_EQ(r.text, "<s>[user:hi]></s>-") << name;
    chat_options kw = o;
    kw.extra = {{"flag", "F"}, {"eos_token", "E"}};
    EXPECT_EQ(t.tmpl->render(msgs, kw).text, "<s>[user:hi]>EF") << name;
  }
  EXPECT_NE(chat_template::from_model(*make("ct-string", as_string, nullptr))
                .tmpl->origin()
                .find("tokenizer_config.json's chat_template"),
            std::string::npos);
  EXPECT_NE(chat_template::from_model(*make("ct-beside", specials, tmpl.c_str()))
                .tmpl->origin()
                .find("chat_template.jinja"),
            std::string::npos);
  // No template at all: neither a template nor an error; the caller says what to pass.
  auto none = chat_template::from_model(*make("ct-none", specials, nullptr));
  EXPECT_FALSE(none.tmpl);
  EXPECT_EQ(none.error, "");
}

// Errors name the file and the template line: a missing file, a syntax error, an unknown filter
// met while rendering, and raise_exception's message.
TEST(ChatTemplate, ErrorsNameFileAndLine) {
  fs::path d = write_dir("ct-errors", tiny(true));
  auto tok = tokenizer::load(d).tok;
  ASSERT_TRUE(tok);
  auto missing = chat_template::from_file(d / "nope.jinja", *tok);
  EXPECT_FALSE(missing.tmpl);
  EXPECT_EQ(missing.error,
            (d / "nope.jinja").string() + ": cannot open the chat template (no such file)");
  std::ofstream(d / "syntax.jinja")
      << "line one\n{% for m in messages %}\n{{ m.content }\n{% endfor %}\n";
  auto syntax = chat_template::from_file(d / "syntax.jinja", *tok);
  EXPECT_FALSE(syntax.tmpl);
  EXPECT_EQ(syntax.error.rfind((d / "syntax.jinja").string() + ": template line 3: ", 0), 0u)
      << syntax.error;
  std::ofstream(d / "filter.jinja") << "a\n\n{{ messages | no_such_filter }}";
  auto filter = chat_template::from_file(d / "filter.jinja", *tok);
  ASSERT_TRUE(filter.tmpl) << filter.error;
  auto r = filter.tmpl->render(ordered_json::array(), {});
  EXPECT_EQ(r.error.rfind((d / "filter.jinja").string() + ": template line 3: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("no_such_filter"), std::string::npos) << r.error;
  auto raising = chat_template::parse("{{ raise_exception('roles must alternate') }}", "x.jinja");
  ASSERT_TRUE(raising.tmpl);
  EXPECT_NE(raising.tmpl->render(ordered_json::array(), {}).error.find("roles must alternate"),
            std::string::npos);
  EXPECT_EQ(raising.tmpl->render(ordered_json::object(), {}).error, "'messages' must be a list");
}

}  // namespace
}  // namespace milesrt::llm
