// `milesrt tokenize`: JSON lines through the real executable, on the oracle's Qwen3 tokenizer.
#include <fstream>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace milesrt::testing {
namespace {

using json = nlohmann::json;
const std::string kData = MILESRT_TOKENIZER_DATA;

std::vector<json> parse_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

TEST(TokenizeCli, TextIdsMessagesAndBadLines) {
  fs::path d = scratch("tokenize");
  {
    std::ofstream in(d / "in.jsonl");
    in << R"({"text": "hello <|im_end|> wörld", "add_special_tokens": false})"
       << "\n"
       << R"({"ids": [1, 2, 3], "skip_special_tokens": true})"
       << "\n"
       << "this is not json\n"
       << R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true, "enable_thinking": false})"
       << "\n"
       << R"({"ids": "nope"})"
       << "\n"
       << R"({"text": "last"})"
       << "\n";
  }
  auto r = run_milesrt(
      "tokenize --model '" + kData + "/qwen3' < '" + (d / "in.jsonl").string() + "'", "tok");
  EXPECT_EQ(r.status, 2) << r.err;  // some lines were bad
  auto out = parse_lines(r.out);
  ASSERT_EQ(out.size(), 6u) << r.out;
  ASSERT_TRUE(out[0].contains("ids"));
  EXPECT_FALSE(out[0]["ids"].empty());
  EXPECT_TRUE(out[1].contains("text"));
  EXPECT_NE(out[2]["error"].get<std::string>().find("line 3: "), std::string::npos) << out[2];
  EXPECT_EQ(out[3]["text"],
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(out[3]["ids"].empty());
  EXPECT_NE(out[4]["error"].get<std::string>().find("line 5: 'ids' must be a list"),
            std::string::npos);
  EXPECT_TRUE(out[5].contains("ids"));

  // Round trip: the ids of line 1 decode back to its text.
  {
    std::ofstream in(d / "in2.jsonl");
    in << json{{"ids", out[0]["ids"]}}.dump() << "\n";
  }
  auto r2 = run_milesrt(
      "tokenize --model '" + kData + "/qwen3' < '" + (d / "in2.jsonl").string() + "'", "tok2");
  EXPECT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(parse_lines(r2.out).at(0)["text"], "hello <|im_end|> wörld");
}

// Ids are taken exactly: one past int32 is refused (not wrapped to a small id), as are fractions
// and ids the tokenizer does not have (no empty text); a recursing chat template is the error of
// its line, and the lines after it are answered.
TEST(TokenizeCli, IdsOutOfRangeAndRecursingTemplatesAreRefused) {
  fs::path d = scratch("tokenize-ids");
  std::ofstream(d / "t.jinja") << "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}";
  {
    std::ofstream in(d / "in.jsonl");
    in << R"({"ids": [4294967297]})"
       << "\n"
       << R"({"ids": [1, 2.5]})"
       << "\n"
       << R"({"ids": [999999]})"
       << "\n"
       << R"({"messages": [{"role": "user", "content": "hi"}]})"
       << "\n"
       << R"({"ids": [1]})"
       << "\n";
  }
  auto r = run_milesrt("tokenize --model '" + kData + "/qwen3' --chat-template '" +
                           (d / "t.jinja").string() + "' < '" + (d / "in.jsonl").string() + "'",
                       "tok-ids");
  EXPECT_EQ(r.status, 2) << r.err;
  auto out = parse_lines(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;
  EXPECT_EQ(out[0]["error"],
            "line 1: 'ids[0]' must be an integer from 0 to 2147483647, got 4294967297");
  EXPECT_EQ(out[1]["error"], "line 2: 'ids[1]' must be an integer from 0 to 2147483647, got 2.5");
  EXPECT_EQ(out[2]["error"],
            "line 3: 'ids[0]': 999999 is not a token id of " + kData + "/qwen3/tokenizer.json");
  EXPECT_NE(out[3]["error"].get<std::string>().find(
                "template line 1: macro 'f': calls nested deeper than 100"),
            std::string::npos)
      << out[3];
  EXPECT_TRUE(out[4].contains("text")) << out[4];
  // A tokenizer.json that is not JSON is reported as such, naming the file.
  fs::create_directories(d / "garbage");
  std::ofstream(d / "garbage" / "tokenizer.json") << "\x7f\xff"
                                                  << "ELF garbage";
  auto g = run_milesrt("tokenize --model '" + (d / "garbage").string() + "' < /dev/null", "tok-g");
  EXPECT_EQ(g.status, 2) << g.err;
  EXPECT_NE(
      g.err.find((d / "garbage" / "tokenizer.json").string() + ": not valid JSON: parse error"),
      std::string::npos)
      << g.err;
  EXPECT_EQ(g.err.find("json.exception"), std::string::npos) << g.err;
}

// --chat-template FILE.jinja: the file is rendered by the Jinja engine with the line's extra keys
// as template variables; a file that is missing or does not compile stops the command, naming the
// file and the template line.
TEST(TokenizeCli, ChatTemplateFileAndItsErrors) {
  fs::path d = scratch("tokenize-chat");
  std::ofstream(d / "t.jinja")
      << "{{ eos_token }}|{% for m in messages %}{{ m.content }}{% endfor %}|"
      << "{{ enable_thinking }}|{{ tools | length }}";
  std::ofstream(d / "bad.jinja") << "ok\n{% if messages %}never closed\n";
  std::ofstream(d / "in.jsonl")
      << R"({"messages": [{"role": "user", "content": "hi"}], "enable_thinking": false,)"
      << R"( "tools": [{"type": "function", "function": {"name": "f"}}]})"
      << "\n";
  const std::string model = " --model '" + kData + "/qwen3'";
  auto ok = run_milesrt("tokenize" + model + " --chat-template '" + (d / "t.jinja").string() +
                            "' < '" + (d / "in.jsonl").string() + "'",
                        "tok-chat");
  EXPECT_EQ(ok.status, 0) << ok.err;
  auto out = parse_lines(ok.out);
  ASSERT_EQ(out.size(), 1u) << ok.out;
  EXPECT_EQ(out[0]["text"], "<|im_end|>|hi|False|1");
  EXPECT_FALSE(out[0]["ids"].empty());
  auto bad = run_milesrt("tokenize" + model + " --chat-template '" + (d / "bad.jinja").string() +
                             "' < '" + (d / "in.jsonl").string() + "'",
                         "tok-chat-bad");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find((d / "bad.jinja").string() + ": template line"), std::string::npos)
      << bad.err;
  auto missing =
      run_milesrt("tokenize" + model + " --chat-template '" + (d / "none.jinja").string() +
                      "' < '" + (d / "in.jsonl").string() + "'",
                  "tok-chat-missing");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find((d / "none.jinja").string() +
                             ": cannot open the chat template (no such file)"),
            std::string::npos)
      << missing.err;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> v;
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// {"text", "add_special_tokens": true} follows --bos: by default (auto) the ids of transformers 4's
// AutoTokenizer(text, add_special_tokens=True), whose classes apply the BOS/EOS conventions the
// models were trained with (transformers 5 ignores add_bos_token / add_eos_token); `config` the
// flags of tokenizer_config.json as they are; `never` no special token.
TEST(TokenizeCli, AddSpecialTokensFollowsBos) {
  fs::path d = scratch("tokenize-bos");
  auto corpus = read_jsonl(kData + "/corpus.jsonl");
  const size_t n = 12;  // the hand-written items: valid UTF-8, so they travel as JSON strings
  for (std::string family : {"llama3_bos", "deepseek_v3_bos", "deepseek_v3_both"}) {
    auto expected = read_jsonl(kData + "/" + family + "/expected.jsonl");
    auto expected_v4 = read_jsonl(kData + "/" + family + "/expected_v4.jsonl");
    ASSERT_GE(expected.size(), n);
    ASSERT_GE(expected_v4.size(), n);
    {
      std::ofstream in(d / "in.jsonl");
      for (size_t i = 0; i < n; ++i) {
        in << json{{"text", unhex(corpus[i]["hex"].get<std::string>())},
                   {"add_special_tokens", true}}
                  .dump()
           << "\n";
      }
      // add_special_tokens defaults to false.
      in << json{{"text", unhex(corpus[0]["hex"].get<std::string>())}}.dump() << "\n";
    }
    for (std::string bos : {"", "auto", "config", "never"}) {
      auto r = run_milesrt("tokenize --model '" + kData + "/" + family + "'" +
                               (bos.empty() ? "" : " --bos " + bos) + " < '" +
                               (d / "in.jsonl").string() + "'",
                           "tok-" + family + bos);
      EXPECT_EQ(r.status, 0) << family << ": " << r.err;
      auto out = parse_lines(r.out);
      ASSERT_EQ(out.size(), n + 1) << family << ": " << r.out;
      for (size_t i = 0; i < n; ++i) {
        std::vector<int> plain = expected[i]["ids"];
        std::vector<int> want = expected_v4[i]["ids"];
        if (bos == "never") {
          want = plain;
        } else if (bos == "config" && family == "llama3_bos") {
          // add_bos_token and add_eos_token both true, which transformers 4's
          // PreTrainedTokenizerFast ignores for EOS: BOS, the text, EOS.
          want = plain;
          want.insert(want.begin(), 33500);  // <|begin_of_text|>
          want.push_back(33504);             // <|eot_id|>, its eos_token
        }
        EXPECT_EQ(out[i]["ids"].get<std::vector<int>>(), want)
            << family << " --bos " << bos << " item " << i;
      }
      EXPECT_EQ(out[n]["ids"], expected[0]["ids"]) << family;
    }
  }
  auto bad = run_milesrt("tokenize --model '" + kData + "/qwen3' --bos sometimes < /dev/null",
                         "tok-bos-bad");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--bos"), std::string::npos) << bad.err;
}

TEST(TokenizeCli, MissingModelIsBadInput) {
  auto r = run_milesrt("tokenize --model /nonexistent/model < /dev/null", "tok3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("milesrt tokenize: error: /nonexistent/model/tokenizer.json: cannot open"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace milesrt::testing
