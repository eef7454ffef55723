// The driver acts on an actor's error by its class (runtime/core/failure.hpp): a stage's bad
// input item is dropped and counted, a transient failure restarts a restartable actor, anything
// else ends the run naming the actor and the class.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/core/errors.hpp"
#include "runtime/driver/driver_testing.hpp"

namespace milesrt::runtime {
namespace {

using namespace driver_testing;

std::vector<std::string> failing(int every, const std::string& cls) {
  return {"stage.fail_every=" + std::to_string(every), "stage.fail_class=" + cls};
}

TEST_F(Driver, ABadInputItemIsDroppedCountedAndTheRunGoesOn) {
  records steps;
  auto o =
      run(testing::toy_graph("", sync_schedule(), kRun), &steps, false, failing(4, "bad_input"));
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.steps, 5u);
  // Every 4th item is refused, and the sources make up for it: 20 trained, about 1 in 4 refused.
  EXPECT_GE(o.counters.items_rejected, 5u);
  EXPECT_EQ(o.counters.items_rejected, o.counters.filtered);
  EXPECT_EQ(o.counters.admitted, o.counters.accepted + o.counters.filtered + o.counters.in_flight +
                                     o.counters.surplus + o.counters.dropped_stale);
  ASSERT_FALSE(o.rejected.empty());
  EXPECT_EQ(o.rejected[0].actor, "stage");
  EXPECT_NE(o.rejected[0].reason.find("toy_stage refuses item"), std::string::npos)
      << o.rejected[0].reason;
  // summary.json names them, and metrics.jsonl counts them.
  std::ifstream in(dir_ / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["counters"]["items_rejected"], o.counters.items_rejected);
  ASSERT_FALSE(summary["rejected"].empty());
  EXPECT_EQ(summary["rejected"][0]["actor"], "stage");
  EXPECT_EQ(summary["rejected"][0]["item"], o.rejected[0].item);
}

TEST_F(Driver, ATransientFailureRestartsARestartableActorAndLosesNothing) {
  auto fields = testing::toy_graph(", replicas = 2", sync_schedule(), kRun);
  fields.replace(fields.find("\"toy_stage\""), 11, "\"toy_flaky_stage\"");
  records steps;
  auto o = run(fields, &steps, false, failing(3, "transient"));
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.counters.restarts, 2u);  // each replica fails once; its replacement is healthy
  EXPECT_EQ(o.counters.items_rejected, 0u);
  std::set<uint64_t> trained;
  check_run(o, steps, false, 0, 4, &trained);
  EXPECT_EQ(trained.size(), 20u);
}

TEST_F(Driver, ATransientFailureOfAKindThatCannotRestartEndsTheRunNamingTheClass) {
  auto o =
      run(testing::toy_graph("", sync_schedule(), kRun), nullptr, false, failing(3, "transient"));
  ASSERT_FALSE(o.ok);
  EXPECT_NE(o.error.find("actor 'stage' (replica 0, kind toy_stage) failed (transient) while"),
            std::string::npos)
      << o.error;
  EXPECT_NE(o.error.find("toy_stage refuses item"), std::string::npos) << o.error;
}

TEST_F(Driver, AnInternalErrorEndsTheRunNamingTheActorAndTheClass) {
  auto o =
      run(testing::toy_graph("", sync_schedule(), kRun), nullptr, false, failing(2, "internal"));
  ASSERT_FALSE(o.ok);
  EXPECT_NE(o.error.find("actor 'stage' (replica 0, kind toy_stage) failed (internal error)"),
            std::string::npos)
      << o.error;
  EXPECT_EQ(o.counters.items_rejected, 0u);
}

TEST(ErrorModel, ExceptionsAreClassedByType) {
  EXPECT_EQ(classify(std::invalid_argument("x")), errc::bad_input);
  EXPECT_EQ(classify(std::out_of_range("x")), errc::internal);
  EXPECT_EQ(classify(std::bad_alloc()), errc::resource);
  EXPECT_EQ(classify(std::runtime_error("CUDA out of memory. Tried to allocate")), errc::resource);
  EXPECT_EQ(classify(std::system_error(std::make_error_code(std::errc::connection_refused))),
            errc::transient);
  EXPECT_EQ(classify(std::runtime_error("x")), errc::internal);
  EXPECT_EQ(classify(failure(errc::cancelled, "x")), errc::cancelled);
}

TEST(ErrorModel, ContextIsAddedOnTheWayUpAndTheClassKept) {
  try {
    in_context("loading 'm'", [] {
      in_context("reading config.json", [] { throw std::invalid_argument("no field 'size'"); });
    });
    FAIL() << "no exception";
  } catch (const failure& f) {
    EXPECT_EQ(f.code(), errc::bad_input);
    EXPECT_STREQ(f.what(), "loading 'm': reading config.json: no field 'size'");
  }
  const caf::error e = add_context(make_failure(errc::transient, "HTTP 503"), "scorer");
  EXPECT_EQ(class_of(e), errc::transient);
  EXPECT_EQ(message_of(e), "scorer: HTTP 503");
  EXPECT_EQ(class_of(to_error(std::invalid_argument("bad"), "stage")), errc::bad_input);
  EXPECT_EQ(message_of(to_error(std::invalid_argument("bad"), "stage")), "stage: bad");
  EXPECT_EQ(class_of(caf::make_error(caf::sec::request_timeout)), errc::transient);
  EXPECT_EQ(class_of(caf::make_error(caf::sec::invalid_argument)), errc::bad_input);
  EXPECT_EQ(class_of(caf::make_error(caf::sec::runtime_error, "x")), errc::internal);
}

}  // namespace
}  // namespace milesrt::runtime
