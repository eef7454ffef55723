// milesrt's Jinja engine against transformers' apply_chat_template on real chat templates of public
// models (test/chat_templates/, sources in its README): test/chat_template_oracle.py rendered each on
// a fixed matrix of conversations during the build; here the engine renders the same and the text
// must be equal byte for byte, or both must raise.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "actors/lib/llm/tokenizer/jinja/program.hpp"

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
    for (auto it = c["variables"].begin(); it != c["variables"].end(); ++it) vars[it.key()] = it.value();
    std::string text, err;
    try {
      text = prog->render(vars, env);
    } catch (const error& e) {
      err = e.what();
    }
    if (c.contains("error")) {
      ++raised;
      EXPECT_NE(err, "") << where << ": transformers raised (" << c["error"] << "), the engine rendered:\n" << text;
      ok[name] += !err.empty();
    } else {
      EXPECT_EQ(err, "") << where;
      EXPECT_EQ(text, c["text"].get<std::string>()) << where;
      ok[name] += err.empty() && text == c["text"].get<std::string>();
    }
  }
  for (const auto& [name, n] : total) std::cout << "[ template ] " << name << ": " << ok[name] << "/" << n << "\n";
  EXPECT_GE(lines, 200u);
  EXPECT_GT(raised, 0u);
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
      EXPECT_NE(err, "") << src << "\ntransformers raised " << c["error"] << ", the engine rendered: " << text;
    } else {
      EXPECT_EQ(err, "") << src;
      EXPECT_EQ(text, c["text"].get<std::string>()) << src;
    }
  }
  EXPECT_GE(n, 40u);
}

}  // namespace
}  // namespace milesrt::llm::jinja
