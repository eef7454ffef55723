// The session table: ids, lookups of unknown and ended sessions, the cap, idle sessions, and
// groups handed out whole, partly, or dropped when their wait runs out.
#include "actors/lib/agent/session_table.hpp"

#include <gtest/gtest.h>

#include <set>

#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;
using namespace std::chrono_literals;
using clock_type = session_table::clock;

std::shared_ptr<const llm::tokenizer> tokenizer() {
  static auto t =
      llm::tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/Qwen-Qwen3-0.6B");
  if (!t.tok) throw std::runtime_error(t.error);
  return t.tok;
}

std::string open(session_table& t, const std::string& group, clock_type::time_point now) {
  std::string id;
  auto e = t.open(group, {{"task", group}}, now, id);
  if (e) ADD_FAILURE() << e->message;
  return id;
}

TEST(SessionTable, OpensFindsEndsAndRefusesWhatIsGoneOrUnknown) {
  session_table_limits limits;
  limits.max_open = 3;
  session_table t(tokenizer(), nullptr, limits);
  const auto now = clock_type::now();
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.insert(open(t, "", now));
  EXPECT_EQ(ids.size(), 3u);
  std::string id;
  auto full = t.open("", nullptr, now, id);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->what, table_error::kind::full);
  EXPECT_EQ(full->message, "3 sessions are open, the most this server keeps");
  EXPECT_EQ(t.counts().refused_full, 1u);

  const std::string a = *ids.begin();
  table_error error;
  session* s = t.find(a, now, error);
  ASSERT_NE(s, nullptr);
  ASSERT_FALSE(s->extend_ids({1, 2}).error);
  s->append_sampled({3}, {-0.5f}, 4);
  EXPECT_FALSE(t.end(a, 1.0, now));
  EXPECT_EQ(t.find(a, now, error), nullptr);
  EXPECT_EQ(error.what, table_error::kind::ended);
  EXPECT_EQ(error.message, "session '" + a + "' has ended");
  EXPECT_EQ(t.end(a, 1.0, now)->what, table_error::kind::ended);
  EXPECT_EQ(t.find("nope", now, error), nullptr);
  EXPECT_EQ(error.what, table_error::kind::unknown);
  EXPECT_EQ(error.message, "no session 'nope'");
  EXPECT_EQ(t.state_of(a), "ended");
  EXPECT_EQ(t.open_count(), 2u);
  EXPECT_FALSE(t.open("", nullptr, now, id));  // room again

  // A session of its own group goes out as soon as it ends, with its tokens and reward.
  auto done = t.take_finished(now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].complete);
  ASSERT_EQ(done[0].sessions.size(), 1u);
  EXPECT_EQ(done[0].sessions[0].id, a);
  EXPECT_EQ(done[0].sessions[0].reward, 1.0);
  EXPECT_EQ(done[0].sessions[0].metadata, (ojson{{"task", ""}}));
  EXPECT_EQ(done[0].sessions[0].tokens->tokens().ids, (std::vector<llm::token_id>{1, 2, 3}));
  EXPECT_TRUE(t.take_finished(now).empty());
  EXPECT_EQ(t.state_of(a), "ended");  // still known: a late request hears it ended

  const std::string b = *std::next(ids.begin());
  EXPECT_FALSE(t.remove(b, now));
  EXPECT_EQ(t.state_of(b), "dropped");
  EXPECT_EQ(t.remove(b, now)->message, "session '" + b + "' has been dropped");
  EXPECT_TRUE(t.take_finished(now).empty());  // dropped: not trained
  EXPECT_EQ(t.counts().deleted, 1u);
}

TEST(SessionTable, AGroupGoesOutWhenAllItsSessionsHaveEnded) {
  session_table t(tokenizer(), nullptr, {});
  const auto now = clock_type::now();
  auto a = open(t, "g", now), b = open(t, "g", now), c = open(t, "h", now);
  EXPECT_FALSE(t.end(b, 0.0, now));
  EXPECT_TRUE(t.take_finished(now + 1s).empty());  // a is still open
  EXPECT_FALSE(t.end(a, std::nullopt, now + 2s));
  auto done = t.take_finished(now + 2s);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].group, "g");
  EXPECT_TRUE(done[0].complete);
  ASSERT_EQ(done[0].sessions.size(), 2u);
  EXPECT_EQ(done[0].sessions[0].id, a);  // in the order opened
  EXPECT_EQ(done[0].sessions[0].reward, std::nullopt);
  EXPECT_EQ(done[0].sessions[1].id, b);
  EXPECT_EQ(t.state_of(c), "open");
  EXPECT_EQ(t.counts().groups_complete, 1u);
}

TEST(SessionTable, AGroupWaitsUpToItsTimeoutThenGoesOutPartlyOrIsDropped) {
  for (bool partial : {true, false}) {
    session_table_limits limits;
    limits.group_timeout = 10s;
    limits.idle_timeout = 1h;
    limits.partial_groups = partial;
    session_table t(tokenizer(), nullptr, limits);
    const auto now = clock_type::now();
    auto a = open(t, "g", now), b = open(t, "g", now);
    EXPECT_FALSE(t.end(a, 1.0, now));
    EXPECT_TRUE(t.take_finished(now + 9s).empty());
    auto done = t.take_finished(now + 10s);
    EXPECT_EQ(t.state_of(b), "dropped");
    EXPECT_EQ(t.counts().waited_out, 1u);
    table_error error;
    EXPECT_EQ(t.find(b, now + 11s, error), nullptr);
    EXPECT_EQ(error.what, table_error::kind::ended);
    if (partial) {
      ASSERT_EQ(done.size(), 1u);
      EXPECT_FALSE(done[0].complete);
      ASSERT_EQ(done[0].sessions.size(), 1u);
      EXPECT_EQ(done[0].sessions[0].id, a);
      EXPECT_EQ(t.counts().groups_partial, 1u);
    } else {
      EXPECT_TRUE(done.empty());
      EXPECT_EQ(t.counts().groups_dropped, 1u);
    }
  }
}

TEST(SessionTable, IdleSessionsAreDroppedAndCounted) {
  session_table_limits limits;
  limits.idle_timeout = 30s;
  session_table t(tokenizer(), nullptr, limits);
  const auto now = clock_type::now();
  auto idle = open(t, "", now), busy = open(t, "", now);
  table_error error;
  ASSERT_NE(t.find(busy, now + 20s, error), nullptr);  // a request: its idle time restarts
  EXPECT_TRUE(t.take_finished(now + 31s).empty());
  EXPECT_EQ(t.state_of(idle), "dropped");
  EXPECT_EQ(t.state_of(busy), "open");
  EXPECT_EQ(t.counts().idle_dropped, 1u);
  EXPECT_EQ(t.open_count(), 1u);
}

}  // namespace
}  // namespace milesrt::agent
