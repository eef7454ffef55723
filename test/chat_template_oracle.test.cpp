// milesrt's Jinja engine against transformers' apply_chat_template on real chat templates of public
// models (test/chat_templates/, sources in its README): test/chat_template_oracle.py rendered each
// on a fixed matrix of conversations during the build; here the engine renders the same and the
// text must be equal byte for byte, or both must raise. Then the same through a model folder, as
// milesrt tokenize / generate / the rollout take it: tokenizer_config.json's chat_template and
// special tokens, and the ids of the text (a synthetic BPE plus the family's special tokens).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/jinja/program.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::llm::jinja {
namespace {

const std::string kMatrix = std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/chat_matrix.jsonl";
const std::string kTemplates = std::string(MILESRT_SOURCE_DIR) + "/test/chat_templates/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

environment fixed_date() {
  environment env;
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  tm.tm_hour = 10;
  tm.tm_min = 30;
  env.now = tm;
  return env;
}

TEST(ChatTemplateOracle, EveryTemplateAndCaseEqualsTransformers) {
  std::ifstream in(kMatrix);
  ASSERT_TRUE(in) << kMatrix;
  std::map<std::string, std::shared_ptr<const program>> programs;
  std::map<std::string, int> ok, total;
  const environment env = fixed_date();
  size_t lines = 0, raised = 0;
  for (std::string line; std::getline(in, line);) {
    ++lines;
    auto c = value::parse(line);
    const std::string name = c["template"];
    const std::string where = name + " / " + c["case"].get<std::string>();
    ++total[name];
    auto& prog = programs[name];
    if (!prog) {
      try {
        prog = program::parse(read_file(kTemplates + name + ".jinja"));
      } catch (const error& e) {
        ADD_FAILURE() << name << ": " << e.what();
        continue;
      }
    }
    value vars = value::object();
    vars["messages"] = c["messages"];
    vars["tools"] = c["tools"];
    vars["documents"] = nullptr;
    vars["add_generation_prompt"] = c["add_generation_prompt"];
    for (auto it = c["variables"].begin(); it != c["variables"].end(); ++it)
      vars[it.key()] = it.value();
    std::string text, err;
    try {
      text = prog->render(vars, env);
    } catch (const error& e) {
      err = e.what();
    }
    if (c.contains("error")) {
      ++raised;
      EXPECT_NE(err, "") << where << ": transformers raised (" << c["error"]
                         << "), the engine rendered:\n"
                         << text;
      ok[name] += !err.empty();
    } else {
      EXPECT_EQ(err, "") << where;
      EXPECT_EQ(text, c["text"].get<std::string>()) << where;
      ok[name] += err.empty() && text == c["text"].get<std::string>();
    }
  }
  for (const auto& [name, n] : total)
    std::cout << "[ template ] " << name << ": " << ok[name] << "/" << n << "\n";
  EXPECT_GE(lines, 200u);
  EXPECT_GT(raised, 0u);
}

// Each template as a model's own: loaded from the folder's tokenizer_config.json, rendered with its
// special tokens and the case's keyword arguments (enable_thinking), then tokenized: text and ids
// equal transformers' and HF tokenizers'.
TEST(ChatTemplateOracle, EveryTemplateFromItsModelFolderGivesTransformersTextAndIds) {
  std::ifstream in(kMatrix);
  ASSERT_TRUE(in) << kMatrix;
  std::map<std::string,
           std::pair<std::shared_ptr<const tokenizer>, std::shared_ptr<const chat_template>>>
      models;
  std::set<std::string> cases;
  size_t compared = 0;
  for (std::string line; std::getline(in, line);) {
    auto c = value::parse(line);
    const std::string name = c["template"];
    const std::string where = name + " / " + c["case"].get<std::string>();
    cases.insert(c["case"].get<std::string>());
    auto& m = models[name];
    if (!m.first) {
      auto loaded = tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/" + name);
      ASSERT_TRUE(loaded.tok) << loaded.error;
      auto t = chat_template::from_model(*loaded.tok);
      ASSERT_TRUE(t.tmpl) << name << ": " << t.error;
      m = {loaded.tok, t.tmpl};
    }
    chat_options o;
    o.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    o.tools = c["tools"];
    o.extra = c["kwargs"];
    o.now = fixed_date().now;
    auto r = m.second->render(c["messages"], o);
    if (c.contains("error")) {
      EXPECT_NE(r.error, "") << where << ": transformers raised, the engine rendered:\n" << r.text;
      continue;
    }
    ASSERT_EQ(r.error, "") << where;
    EXPECT_EQ(r.text, c["text"].get<std::string>()) << where;
    EXPECT_EQ(m.first->encode(r.text), c["ids"].get<std::vector<token_id>>()) << where;
    ++compared;
  }
  // The matrix the issue names: every family on each conversation, with and without the prompt.
  for (const char* k : {"single_user", "system_three_turns", "tools", "tools_string_arguments",
                        "reasoning", "thinking_off"}) {
    for (const char* agp : {"true", "false"}) {
      EXPECT_TRUE(cases.count(std::string(k) + "/agp=" + agp)) << k << " agp=" << agp;
    }
  }
  EXPECT_GE(models.size(), 24u);
  EXPECT_GE(compared, 200u);
}

// Small templates on the corners of Jinja's semantics (scoping, loop variables, whitespace control,
// Python's str() of values, filters, errors), rendered by transformers' own Jinja environment.
TEST(ChatTemplateOracle, JinjaCornersEqualTransformersEnvironment) {
  std::ifstream in(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/jinja_cases.jsonl");
  ASSERT_TRUE(in);
  const environment env = fixed_date();
  size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    auto c = value::parse(line);
    const std::string src = c["source"];
    std::string text, err;
    try {
      text = program::parse(src)->render(c["variables"], env);
    } catch (const error& e) {
      err = e.what();
    }
    if (c.contains("error")) {
      EXPECT_NE(err, "") << src << "\ntransformers raised " << c["error"]
                         << ", the engine rendered: " << text;
    } else {
      EXPECT_EQ(err, "") << src;
      EXPECT_EQ(text, c["text"].get<std::string>()) << src;
    }
  }
  EXPECT_GE(n, 40u);
}

}  // namespace
}  // namespace milesrt::llm::jinja
