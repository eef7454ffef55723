#include "actors/lib/tasks/jsonl_dataset.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace milesrt::tasks {
namespace {
namespace fs = std::filesystem;

class JsonlDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-jsonl-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& text) {
    auto path = dir_ / "d.jsonl";
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text, const data_keys& keys = {}) {
    try {
      load_jsonl(write(text), keys);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "<no error>";
  }
  fs::path dir_;
};

TEST_F(JsonlDataset, ReadsRecordsWithTheirFields) {
  auto path = write(R"({"prompt": "1+1?", "label": 2}
{"prompt": "name?", "label": "Ada", "response": "Ada."}

{"messages": [{"role": "user", "content": "hi"}], "label": 2.5, "extra": true}
{"prompt": "p", "label": null}
)");
  auto records = load_jsonl(path, {});
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].prompt, "1+1?");
  EXPECT_EQ(records[0].label, "2");
  EXPECT_EQ(records[0].messages_json, "");
  EXPECT_EQ(records[1].label, "Ada");
  EXPECT_EQ(records[1].response, "Ada.");
  EXPECT_EQ(records[2].prompt, "");
  EXPECT_EQ(records[2].label, "2.5");
  EXPECT_EQ(records[2].messages_json, R"([{"content":"hi","role":"user"}])");
  EXPECT_EQ(records[3].label, "");
}

TEST_F(JsonlDataset, UsesTheGivenKeys) {
  data_keys keys;
  keys.prompt = "question";
  keys.label = "answer";
  auto records =
      load_jsonl(write(R"({"question": "q", "answer": "-3", "prompt": "ignored"})"), keys);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].prompt, "q");
  EXPECT_EQ(records[0].label, "-3");
}

TEST_F(JsonlDataset, NamesTheFileLineAndProblem) {
  const std::string f = (dir_ / "d.jsonl").string();
  EXPECT_EQ(
      error_of("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n").rfind(f + ":2: not valid JSON", 0), 0u)
      << error_of("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n");
  EXPECT_EQ(error_of("\n[1, 2]\n"), f + ":2: a array, not a JSON object");
  EXPECT_EQ(error_of("{\"prompt\": 5}"), f + ":1: 'prompt' is number, not a string");
  EXPECT_EQ(error_of("{\"label\": 5}"), f + ":1: no 'prompt', 'messages' or 'prompt_ids'");
  EXPECT_EQ(error_of("{\"prompt\": \"a\", \"label\": [1]}"),
            f + ":1: 'label' is array, not a string or number");
  EXPECT_EQ(error_of("{\"prompt\": \"a\", \"messages\": \"hi\"}"),
            f + ":1: 'messages' is string, not an array of {role, content}");
  EXPECT_EQ(error_of("{\"prompt\": \"a\", \"response\": 1}"),
            f + ":1: 'response' is number, not a string");
}

TEST_F(JsonlDataset, NamesAMissingFile) {
  try {
    load_jsonl(dir_ / "absent.jsonl", {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), (dir_ / "absent.jsonl").string() + ": no such file");
  }
}

}  // namespace
}  // namespace milesrt::tasks
