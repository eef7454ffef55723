// What a streamed reply sends while the model writes: only settled text (never the start of a
// tool call, a `</think>` or a stop string), so that the chunks add up to the final reply; and
// where a stop string cuts the reply's text.
#include "actors/session_server/reply_stream.hpp"

#include <gtest/gtest.h>

namespace milesrt::session_server {
namespace {
using agent::tool_call_format;

/// The settled content after each character of `text` arrived, joined as a client would.
std::string streamed_content(const std::string& text, tool_call_format f,
                             const std::vector<std::string>& stop = {}) {
  std::string sent;
  for (size_t n = 1; n <= text.size(); ++n) {
    auto now = settle_text(text.substr(0, n), f, false, stop).content;
    EXPECT_EQ(now.compare(0, sent.size(), sent), 0)
        << "'" << now << "' does not extend '" << sent << "' at " << n;
    sent = now;
  }
  return sent;
}

TEST(ReplyStream, ContentGrowsAndStopsBeforeAToolCall) {
  const std::string text = "Let me add. <tool_call>\n{\"name\": \"add\"}\n</tool_call>";
  EXPECT_EQ(streamed_content(text, tool_call_format::hermes), "Let me add.");
  // A partial tag is held back until it is clearly not one.
  EXPECT_EQ(settle_text("Sum <tool_", tool_call_format::hermes, false, {}).content, "Sum");
  EXPECT_EQ(settle_text("Sum <tool_x", tool_call_format::hermes, false, {}).content, "Sum <tool_x");
  // Without a tool-call format, the tag is text.
  EXPECT_EQ(settle_text("a <tool_call>", tool_call_format::none, false, {}).content,
            "a <tool_call>");
  // Llama 3.1's JSON call: nothing settles while the reply may be one.
  EXPECT_EQ(settle_text("{\"name\": \"add\"", tool_call_format::llama3_json, false, {}).content,
            "");
  EXPECT_EQ(settle_text("The sum", tool_call_format::llama3_json, false, {}).content, "The sum");
}

// A character split across tokens decodes as U+FFFD until it is whole: never sent, so what was
// sent stays a prefix of the text to come.
TEST(ReplyStream, AnIncompleteCharacterIsHeldBack) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(settle_text("Price: 5 " + fffd, tool_call_format::hermes, false, {}).content,
            "Price: 5");
  EXPECT_EQ(settle_text("Price: 5 \xE2\x82\xAC", tool_call_format::hermes, false, {}).content,
            "Price: 5 \xE2\x82\xAC");
  std::string sent;
  for (const std::string& now :
       {std::string("Caf"), "Caf" + fffd, std::string("Caf\xC3\xA9"),
        "Caf\xC3\xA9 au " + fffd + fffd, std::string("Caf\xC3\xA9 au lait")}) {
    auto c = settle_text(now, tool_call_format::hermes, false, {}).content;
    EXPECT_EQ(c.compare(0, sent.size(), sent), 0)
        << "'" << c << "' does not extend '" << sent << "'";
    sent = c;
  }
  EXPECT_EQ(sent, "Caf\xC3\xA9 au lait");
}

TEST(ReplyStream, ReasoningIsSentApartFromContent) {
  auto a = settle_text("<think>\nadd them</thi", tool_call_format::hermes, false, {});
  EXPECT_EQ(a.reasoning, "add them");
  EXPECT_EQ(a.content, "");
  auto b = settle_text("<think>\nadd them</think>\n\nIt is 3", tool_call_format::hermes, false, {});
  EXPECT_EQ(b.reasoning, "add them");
  EXPECT_EQ(b.content, "It is 3");
  // The prompt opened the block: all before `</think>` is reasoning.
  auto c = settle_text("add them", tool_call_format::hermes, true, {});
  EXPECT_EQ(c.reasoning, "add them");
  EXPECT_EQ(c.content, "");
  // "<thi" may open a block: held back.
  EXPECT_EQ(settle_text("<thi", tool_call_format::hermes, false, {}).content, "");
}

TEST(ReplyStream, AStopStringIsNeverSentNorWhatFollowsIt) {
  EXPECT_EQ(cut_at_stop("one two. three", {"."}), "one two");
  EXPECT_EQ(cut_at_stop("one two. three", {"three", "two"}), "one ");
  EXPECT_EQ(cut_at_stop("one", {"x"}), "one");
  EXPECT_EQ(streamed_content("Answer: 5 END more", tool_call_format::none, {"END"}), "Answer: 5");
  // The stop string's beginning is held back until it is clearly not the stop string.
  EXPECT_EQ(settle_text("Answer EN", tool_call_format::none, false, {"END"}).content, "Answer");
  EXPECT_EQ(settle_text("Answer ENX", tool_call_format::none, false, {"END"}).content,
            "Answer ENX");
}

}  // namespace
}  // namespace milesrt::session_server
