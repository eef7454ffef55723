// A session's trajectory tree over the real Qwen3 template: a retried turn, an edited tool result
// and a compaction each branch at the deepest message the request repeats, the shared prefix's
// tokens kept as stored (sampled ones included); a request that extends an older path goes on
// there; the limits refuse naming themselves; which trajectories train (leaves, lastLeaf, all);
// the merged view's nodes; ids branching at the deepest turn start they repeat.
#include "actors/lib/agent/session_tree.hpp"

#include <gtest/gtest.h>

#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

struct model {
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> tmpl;
};

model load() {
  auto t = llm::tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/Qwen-Qwen3-0.6B");
  if (!t.tok) throw std::runtime_error(t.error);
  auto c = llm::chat_template::from_model(*t.tok);
  if (!c.tmpl) throw std::runtime_error(c.error);
  return {t.tok, c.tmpl};
}

/// A request, then the model's `text` as its sampled turn (log-probs told apart by `lp`); the
/// reply message the client gets.
ojson turn(session_tree& t, const model& m, const ojson& messages, const std::string& text,
           float lp = -0.5f) {
  auto r = t.extend(messages, {});
  if (r.error) throw std::runtime_error(r.error->message);
  auto ids = m.tok->encode(text, false);
  auto reply =
      assistant_message(parse_reply(reply_text(*m.tok, ids), tool_call_format::hermes, "call_x_"));
  t.current().append_sampled(ids, std::vector<float>(ids.size(), lp), 1, reply);
  return reply;
}

ojson user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
ojson tool(const std::string& text) {
  return {{"role", "tool"}, {"tool_call_id", "call_x_0"}, {"content", text}};
}
const std::string kCall =
    "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call><|im_end|>";

bool starts_with(const session_tokens& a, const session_tokens& b) {
  return a.size() >= b.size() && std::equal(b.ids.begin(), b.ids.end(), a.ids.begin()) &&
         std::equal(b.origins.begin(), b.origins.end(), a.origins.begin()) &&
         std::equal(b.logprobs.begin(), b.logprobs.end(), a.logprobs.begin());
}

TEST(SessionTree, ARetriedTurnBranchesAtItsStartAndBothLeavesTrain) {
  const auto m = load();
  session_tree t(m.tok, m.tmpl);
  ojson msgs = ojson::array({user("What is 1+2?")});
  turn(t, m, msgs, "It is 3.<|im_end|>", -0.1f);
  const auto first = t.tokens();
  // The same request again: a retry. It branches at the root; its prompt is the same tokens.
  turn(t, m, msgs, "Three.<|im_end|>", -0.2f);
  ASSERT_EQ(t.path_count(), 2u);
  EXPECT_EQ(t.current_id(), 1u);
  const auto leaves = t.trained(train_on::leaves);
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(leaves[0].tokens.ids, first.ids);
  EXPECT_NE(leaves[1].tokens.ids, first.ids);
  EXPECT_EQ(t.trained(train_on::last_leaf).size(), 1u);
  EXPECT_EQ(t.trained(train_on::last_leaf)[0].path, 1u);
  // The view: one node for the shared prompt, two leaves under it.
  auto v = t.describe();
  ASSERT_EQ(v["nodes"].size(), 3u);
  EXPECT_TRUE(v["nodes"][0]["parent"].is_null());
  EXPECT_EQ(v["nodes"][0]["trajectories"].size(), 2u);
  EXPECT_EQ(v["nodes"][1]["parent"], 1);
  EXPECT_EQ(v["nodes"][2]["parent"], 1);
  EXPECT_EQ(v["nodes"][1]["loss_mask"][0], 1);  // the replies' first tokens are sampled
  EXPECT_EQ(v["trajectories"][1]["parent"], 0);
}

TEST(SessionTree, AnEditedToolResultKeepsTheSampledCallAndBranchesAfterIt) {
  const auto m = load();
  session_tree t(m.tok, m.tmpl);
  ojson msgs = ojson::array({user("Add 1 and 2.")});
  msgs.push_back(turn(t, m, msgs, kCall, -0.3f));
  const auto after_call = t.tokens();  // the call, sampled
  msgs.push_back(tool("3"));
  turn(t, m, msgs, "3.<|im_end|>");
  msgs[2] = tool("three");  // the harness edits the tool's result
  turn(t, m, msgs, "Three.<|im_end|>");
  ASSERT_EQ(t.path_count(), 2u);
  const auto paths = t.trained(train_on::leaves);
  // The new path holds the first path's tokens up to the call exactly, sampled ones as sampled.
  EXPECT_TRUE(starts_with(paths[1].tokens, after_call));
  EXPECT_TRUE(starts_with(paths[0].tokens, after_call));
  EXPECT_NE(paths[0].tokens.ids, paths[1].tokens.ids);
  // The view: a first node shared by both, holding the call and the tool result's first tokens
  // (up to where "3" and "three" part), two below it.
  auto v = t.describe();
  ASSERT_EQ(v["nodes"].size(), 3u);
  EXPECT_GT(v["nodes"][0]["token_ids"].size(), after_call.size());
  EXPECT_EQ(v["nodes"][0]["trajectories"], ojson::array({0, 1}));
}

TEST(SessionTree, ACompactionReplacingEarlyTurnsBranchesAtTheRoot) {
  const auto m = load();
  session_tree t(m.tok, m.tmpl);
  ojson msgs = ojson::array({user("Add 1 and 2, three times.")});
  for (int i = 0; i < 3; ++i) {
    msgs.push_back(turn(t, m, msgs, kCall));
    msgs.push_back(tool("3"));
  }
  const size_t turns = t.turns();
  ojson compacted = ojson::array(
      {user("Summary: you added 1 and 2 three times; all gave 3."), user("Now say the answer.")});
  turn(t, m, compacted, "3.<|im_end|>");
  EXPECT_EQ(t.path_count(), 2u);
  EXPECT_EQ(t.turns(), 1u);
  // `all` trains each turn once: the first path's three turns as prefixes where later continued
  // (after turns 1, 2) and whole (turns 1-3), and the compacted path.
  EXPECT_EQ(t.trained(train_on::all).size(), 2u + 1u + 1u);
  EXPECT_EQ(turns, 3u);
  // The rollback took 3 turns back: over a limit of 2 it is refused, naming the limit.
  session_tree small(m.tok, m.tmpl, 0, 0, tree_limits{true, 64, 2});
  ojson again = ojson::array({user("Add 1 and 2, three times.")});
  for (int i = 0; i < 3; ++i) {
    again.push_back(turn(small, m, again, kCall));
    again.push_back(tool("3"));
  }
  auto r = small.extend(compacted, {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::limit);
  EXPECT_EQ(r.error->message.rfind("maxRollbackTurns:", 0), 0u) << r.error->message;
  EXPECT_EQ(small.path_count(), 1u);  // nothing kept of the refused request
}

TEST(SessionTree, BranchesAreBoundedAndBranchingCanBeOff) {
  const auto m = load();
  session_tree t(m.tok, m.tmpl, 0, 0, tree_limits{true, 2, 256});
  ojson msgs = ojson::array({user("Hi")});
  turn(t, m, msgs, "Hello.<|im_end|>");
  turn(t, m, msgs, "Hey.<|im_end|>");
  auto r = t.extend(msgs, {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->message.rfind("maxBranches:", 0), 0u) << r.error->message;
  session_tree off(m.tok, m.tmpl, 0, 0, tree_limits{false, 64, 256});
  turn(off, m, msgs, "Hello.<|im_end|>");
  r = off.extend(msgs, {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::not_an_extension);
  EXPECT_EQ(off.path_count(), 1u);
}

TEST(SessionTree, ARequestExtendingAnOlderPathGoesOnThereAndUndoTakesABranchBack) {
  const auto m = load();
  session_tree t(m.tok, m.tmpl);
  ojson a = ojson::array({user("Hi")});
  a.push_back(turn(t, m, a, "Hello.<|im_end|>"));
  ojson b = ojson::array({user("Hi")});
  b.push_back(turn(t, m, b, "Hey.<|im_end|>"));
  ASSERT_EQ(t.current_id(), 1u);
  a.push_back(user("More."));
  turn(t, m, a, "Sure.<|im_end|>");
  EXPECT_EQ(t.path_count(), 2u);
  EXPECT_EQ(t.current_id(), 0u);
  EXPECT_EQ(t.turns(), 2u);
  // A branch taken back (its turn failed) leaves the tree as it was.
  const auto before = t.mark();
  b.push_back(user("Other."));
  ASSERT_FALSE(t.extend(ojson::array({user("Different")}), {}).error);
  EXPECT_EQ(t.path_count(), 3u);
  t.undo(before);
  EXPECT_EQ(t.path_count(), 2u);
  EXPECT_EQ(t.current_id(), 0u);
}

TEST(SessionTree, IdsBranchAtTheDeepestTurnStartTheyRepeat) {
  const auto m = load();
  session_tree t(m.tok, nullptr);
  std::vector<llm::token_id> ids = {1, 2, 3};
  ASSERT_FALSE(t.extend_ids(ids).error);
  t.current().append_sampled({7, 8}, {-1.f, -2.f}, 1);
  ids = {1, 2, 3, 7, 8, 4};
  ASSERT_FALSE(t.extend_ids(ids).error);
  t.current().append_sampled({9}, {-3.f}, 1);
  // Departs inside turn 2's prompt: branches at turn 2's start, turn 1's sampled tokens kept.
  ASSERT_FALSE(t.extend_ids({1, 2, 3, 7, 8, 5}).error);
  EXPECT_EQ(t.path_count(), 2u);
  const auto& s = t.tokens();
  EXPECT_EQ(s.ids, (std::vector<llm::token_id>{1, 2, 3, 7, 8, 5}));
  EXPECT_EQ(s.origins[3], token_origin::sampled);
  EXPECT_EQ(s.logprobs[4], -2.f);
}

}  // namespace
}  // namespace milesrt::agent
