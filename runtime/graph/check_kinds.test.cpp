#include "runtime/graph/check_kinds.hpp"

#include "runtime/graph/overrides.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/testing/scratch_graph.hpp"

namespace milesrt::graph {
namespace {

class CheckKinds : public testing::scratch_test {
 protected:
  /// All problems of a graph, joined by newlines.
  std::string problems(const std::string& fields) {
    auto g = load("g.capnp", fields);
    if (!g) return "<load failed>";
    std::string s;
    for (const auto& d : validate_structure(*g)) s += d.text() + "\n";
    for (const auto& d : validate_kinds(*g, kinds_)) s += d.text() + "\n";
    return s;
  }
  std::string file() const { return (dir_ / "g.capnp").string() + ": "; }
};

const std::string kSync = "(sync = void)";
const std::string kRun = "(steps = 2, batchSize = 2)";

TEST_F(CheckKinds, TheToyPipelineIsRunnable) {
  EXPECT_EQ(problems(testing::toy_graph("", kSync, kRun)), "");
}

TEST_F(CheckKinds, UnknownKindNamesActorAndKnownKinds) {
  auto s = problems(R"(actors = [(name = "x", kind = "nope")])");
  EXPECT_NE(s.find(file() + "actor 'x': field 'kind': unknown actor kind 'nope' (known: "
                            "toy_asker, toy_buffer, toy_doubler, toy_flaky_stage, toy_learner, "
                            "toy_mortal_stage, toy_relay, toy_source, toy_stage)"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, UnknownOutputAndInputPorts) {
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("src.items"), 9, "src.itemz");
  fields.replace(fields.find("learner.items"), 13, "learner.batch");
  auto s = problems(fields);
  EXPECT_NE(s.find("edge 0 (src.itemz -> stage.items): field 'from': actor 'src' (kind "
                   "toy_source) has no output port 'itemz' (outputs: items)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("edge 1 (stage.items -> learner.batch): field 'to': actor 'learner' (kind "
                   "toy_learner) has no input port 'batch' (inputs: items)"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, PortTypeMismatch) {
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("to = \"stage.weights\""), 20, "to = \"stage.items\"");
  auto s = problems(fields);
  EXPECT_NE(s.find("edge 2 (learner.weights -> stage.items): port type mismatch: "
                   "learner.weights carries 'toy.version' but stage.items takes 'toy.item'"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, AnEdgeIntoTheLearnerHoldsAWholeBatch) {
  auto fields = testing::toy_graph("", kSync, "(steps = 2, batchSize = 4)");
  const std::string to = "to = \"learner.items\")";
  fields.replace(fields.find(to), to.size(), "to = \"learner.items\", capacity = 3)");
  EXPECT_EQ(problems(fields),
            file() +
                "edge 1 (stage.items -> learner.items): field 'capacity': 3 is below "
                "run.batchSize 4: the learner's buffer could never hold a batch "
                "(0: the schedule's window)\n");
  fields.replace(fields.find("capacity = 3"), 12, "capacity = 4");
  EXPECT_EQ(problems(fields), "");
}

TEST_F(CheckKinds, DanglingAndDuplicateEdges) {
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("edges = ["), 9,
                 "edges = [(from = \"ghost.items\", to = \"stage.items\"), "
                 "(from = \"src.items\", to = \"stage.items\"), ");
  auto s = problems(fields);
  EXPECT_NE(s.find("edge 0 (ghost.items -> stage.items): field 'from': no actor named 'ghost'"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("edge 2 (src.items -> stage.items): duplicate edge"), std::string::npos) << s;
}

TEST_F(CheckKinds, ParameterErrors) {
  auto s = problems(testing::toy_graph(
      R"(, params = (custom = [(name = "stall_after", value = (int = -5)),
                               (name = "die_after", value = (text = "soon")),
                               (name = "colour", value = (int = 1)),
                               (name = "drop_every", value = (int = 1)),
                               (name = "drop_every", value = (int = 2))]))",
      kSync, kRun));
  EXPECT_NE(
      s.find("actor 'stage': param 'stall_after': value -5.000000 out of range [-1.000000, inf]"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find("actor 'stage': param 'die_after': expected int, got text"), std::string::npos)
      << s;
  EXPECT_NE(s.find("actor 'stage': param 'colour': kind 'toy_stage' has no such parameter "
                   "(declared: stall_after, die_after, drop_every, delay_ms, restores_version, "
                   "value_metric, fail_every, fail_class)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("actor 'stage': param 'drop_every': set twice"), std::string::npos) << s;
}

TEST_F(CheckKinds, MissingRequiredParameter) {
  runtime::kind_descriptor k = *kinds_.find("toy_stage");
  k.name = "picky_stage";
  k.params.push_back({"url", runtime::param_type::text, "where to send items", true, std::nullopt,
                      std::nullopt, std::nullopt});
  kinds_.add(k);
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("\"toy_stage\""), 11, "\"picky_stage\"");
  auto s = problems(fields);
  EXPECT_NE(s.find("actor 'stage': param 'url': required by kind 'picky_stage' (text, where to "
                   "send items)"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, ActorsNoScheduleCanDrive) {
  auto s = problems(R"(
    actors = [(name = "orphan", kind = "toy_stage"),
              (name = "a", kind = "toy_learner"), (name = "b", kind = "toy_learner", replicas = 2)],
    edges = [(from = "orphan.items", to = "a.items")])");
  EXPECT_NE(
      s.find("graph: field 'actors': the schedule needs a source actor (one, or several mixed by "
             "weight), found none"),
      std::string::npos)
      << s;
  EXPECT_EQ(s.find("learner actor"), std::string::npos)
      << s;  // two learners are fine: a is the policy
  EXPECT_NE(s.find("actor 'b': field 'replicas': a learner runs as exactly one replica"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, SeveralSourcesMixedByWeightAndOnlySourcesTakeOne) {
  // Two sources feeding one stage is a valid mix; a negative weight, or a weight on a stage, is
  // not.
  auto ok = problems(R"(
    actors = [(name = "a", kind = "toy_source", weight = 0.7), (name = "b", kind = "toy_source", weight = 0.3),
              (name = "stage", kind = "toy_stage"), (name = "learner", kind = "toy_learner")],
    edges = [(from = "a.items", to = "stage.items"), (from = "b.items", to = "stage.items"),
             (from = "stage.items", to = "learner.items")])");
  EXPECT_EQ(ok, "");
  auto s = problems(R"(
    actors = [(name = "a", kind = "toy_source", weight = 0.7), (name = "b", kind = "toy_source", weight = -1),
              (name = "stage", kind = "toy_stage", weight = 2), (name = "learner", kind = "toy_learner")],
    edges = [(from = "a.items", to = "stage.items"), (from = "b.items", to = "stage.items"),
             (from = "stage.items", to = "learner.items")])");
  EXPECT_NE(s.find("actor 'b': field 'weight': -1.000000 is not a finite weight >= 0"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("actor 'stage': field 'weight': only sources are mixed by weight (kind "
                   "'toy_stage' is not "
                   "a source)"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("actor 'a'"), std::string::npos) << s;
}

TEST_F(CheckKinds, ABufferAloneFeedsTheLearner) {
  const std::string actors =
      R"(actors = [(name = "src", kind = "toy_source"), (name = "stage", kind = "toy_stage"),
              (name = "buf", kind = "toy_buffer"), (name = "learner", kind = "toy_learner")],)";
  EXPECT_EQ(problems(actors + R"(
    edges = [(from = "src.items", to = "stage.items"), (from = "stage.items", to = "buf.items"),
             (from = "buf.items", to = "learner.items")])"),
            "");
  // The stage feeds the learner around the buffer, and the buffer feeds a stage.
  auto s = problems(actors + R"(
    edges = [(from = "src.items", to = "stage.items"), (from = "stage.items", to = "buf.items", capacity = 1),
             (from = "stage.items", to = "learner.items"), (from = "buf.items", to = "stage.items")],
    run = (steps = 2, batchSize = 2))");
  EXPECT_NE(s.find("edge 2 (stage.items -> learner.items): the learner 'learner' takes its batches "
                   "from the buffer "
                   "'buf' only: route stage.items into the buffer instead"),
            std::string::npos)
      << s;
  EXPECT_NE(
      s.find(
          "edge 3 (buf.items -> stage.items): the buffer 'buf' feeds the learner 'learner' only"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find("actor 'buf': no edge leads from the buffer to the learner 'learner'"),
            std::string::npos)
      << s;
  // The edge into the buffer bounds the learner's items: it holds a batch.
  EXPECT_NE(
      s.find("edge 1 (stage.items -> buf.items): field 'capacity': 1 is below run.batchSize 2"),
      std::string::npos)
      << s;
  auto two =
      problems(R"(actors = [(name = "src", kind = "toy_source"), (name = "b1", kind = "toy_buffer"),
              (name = "b2", kind = "toy_buffer"), (name = "learner", kind = "toy_learner")],
    edges = [(from = "src.items", to = "b1.items"), (from = "src.items", to = "b2.items"),
             (from = "b1.items", to = "learner.items"), (from = "b2.items", to = "learner.items")])");
  EXPECT_NE(two.find("graph: field 'actors': a graph holds at most one buffer actor (the "
                     "learner's), found 2: b1, b2"),
            std::string::npos)
      << two;
  // A buffer kind that says it may be restarted would lose its items in a restart: refused.
  auto restartable = *kinds_.find("toy_buffer");
  restartable.name = "toy_restartable_buffer";
  restartable.restartable = true;
  kinds_.add(restartable);
  EXPECT_NE(
      problems(
          R"(actors = [(name = "src", kind = "toy_source"), (name = "buf", kind = "toy_restartable_buffer"),
              (name = "learner", kind = "toy_learner")],
    edges = [(from = "src.items", to = "buf.items"), (from = "buf.items", to = "learner.items")])")
          .find("actor 'buf': field 'kind': kind 'toy_restartable_buffer' is a buffer declared "
                "restartable"),
      std::string::npos);
  EXPECT_NE(
      problems(
          R"(actors = [(name = "src", kind = "toy_source"), (name = "buf", kind = "toy_buffer", replicas = 2),
              (name = "learner", kind = "toy_learner")],
    edges = [(from = "src.items", to = "buf.items"), (from = "buf.items", to = "learner.items")])")
          .find("actor 'buf': field 'replicas': a buffer runs as exactly one replica"),
      std::string::npos);
}

TEST_F(CheckKinds, SeveralLearnersButOneWithABuffer) {
  EXPECT_NE(problems(R"(actors = [(name = "src", kind = "toy_source")], edges = [])")
                .find("graph: field 'actors': the schedule needs a learner actor, found none"),
            std::string::npos);
  auto two = R"(actors = [(name = "src", kind = "toy_source"), (name = "stage", kind = "toy_stage"),
              (name = "policy", kind = "toy_learner"), (name = "second", kind = "toy_learner")],
    edges = [(from = "src.items", to = "stage.items"), (from = "stage.items", to = "policy.items"),
             (from = "stage.items", to = "second.items")])";
  EXPECT_EQ(problems(two), "");
  auto s = problems(
      R"(actors = [(name = "src", kind = "toy_source"), (name = "buf", kind = "toy_buffer"),
              (name = "policy", kind = "toy_learner"), (name = "second", kind = "toy_learner")],
    edges = [(from = "src.items", to = "buf.items"), (from = "buf.items", to = "policy.items"),
             (from = "src.items", to = "second.items")])");
  EXPECT_NE(s.find("graph: field 'actors': a graph with a buffer actor drives one learner, found 2 "
                   "(policy, second)"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, UnreachableActor) {
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("actors = ["), 10,
                 "actors = [(name = \"idle\", kind = \"toy_stage\"), ");
  auto s = problems(fields);
  EXPECT_NE(s.find("actor 'idle': no schedule can drive it: no path of edges leads to it from "
                   "the source 'src'"),
            std::string::npos)
      << s;
}

TEST_F(CheckKinds, ParamsOfTheWrongShape) {
  auto s = problems(testing::toy_graph(", params = (none = void)", kSync, kRun));
  EXPECT_EQ(s, "");
}

TEST_F(CheckKinds, AKindWhoseParamsMemberTheSchemaLacks) {
  // A kind names its member of ActorSpec.params (the app's /milesrt/kinds.capnp); one that names
  // a member the schema lacks is reported, by validation and by --set, instead of throwing.
  runtime::kind_descriptor odd = *kinds_.find("toy_stage");
  odd.name = "toy_odd_stage";
  odd.params_member = "nonesuch";
  kinds_.add(odd);
  auto fields = testing::toy_graph("", kSync, kRun);
  fields.replace(fields.find("kind = \"toy_stage\""), 18, "kind = \"toy_odd_stage\"");
  auto s = problems(fields);
  EXPECT_NE(
      s.find(file() + "actor 'stage': field 'params': kind 'toy_odd_stage' takes params "
                      "(nonesuch = (...)), but the schema of kinds (/milesrt/kinds.capnp) has "
                      "no such member (members: none, custom, "),
      std::string::npos)
      << s;
  auto g = load("g.capnp", fields);
  ASSERT_TRUE(g);
  auto d = apply_override(*g, kinds_, "stage.x=1");
  ASSERT_TRUE(d);
  EXPECT_NE(d->text().find("--set stage.x=1: kind 'toy_odd_stage' takes params (nonesuch = (...))"),
            std::string::npos)
      << d->text();
}

TEST_F(CheckKinds, OverridesSetRunFieldsActorFieldsAndParams) {
  auto g = load("g.capnp", testing::toy_graph("", kSync, kRun));
  ASSERT_TRUE(g);
  EXPECT_FALSE(apply_override(*g, kinds_, "run.steps=7"));
  EXPECT_FALSE(apply_override(*g, kinds_, "stage.replicas=3"));
  EXPECT_FALSE(apply_override(*g, kinds_, "stage.drop_every=4"));
  EXPECT_FALSE(apply_override(*g, kinds_, "stage.drop_every=5"));  // replaces, not appends
  EXPECT_FALSE(apply_override(*g, kinds_, "run.dir=elsewhere"));
  auto r = g->reader();
  EXPECT_EQ(r.getRun().getSteps(), 7u);
  EXPECT_EQ(std::string(r.getRun().getDir()), "elsewhere");
  EXPECT_EQ(r.getActors()[1].getReplicas(), 3u);
  auto params = resolve_params(r.getActors()[1], *kinds_.find("toy_stage"));
  EXPECT_EQ(std::get<int64_t>(params.at("drop_every")), 5);
  EXPECT_EQ(std::get<int64_t>(params.at("stall_after")), -1);  // the declared default
  EXPECT_EQ(r.getActors()[1].getParams().getCustom().size(), 1u);
}

TEST_F(CheckKinds, BadOverridesNameTheProblem) {
  auto g = load("g.capnp", testing::toy_graph("", kSync, kRun));
  ASSERT_TRUE(g);
  auto msg = [&](const std::string& a) {
    auto d = apply_override(*g, kinds_, a);
    return d ? d->text() : std::string("<accepted>");
  };
  EXPECT_EQ(msg("steps=3"), "--set steps=3: expected actor.param=value or run.field=value");
  EXPECT_EQ(
      msg("run.stepz=3"),
      "--set run.stepz=3: no field 'stepz' (fields: steps, seed, dir, checkpointInterval, "
      "progressMetric, batchSize, deadlineSeconds, workerWaitSeconds, plot, sinks, chart, "
      "metricsPort, workerGraceSeconds, maxRestarts, restartWindowSeconds, maxStartupFailures, "
      "maxOverSampling)");
  EXPECT_EQ(msg("run.steps=-1"), "--set run.steps=-1: expected a non-negative integer");
  EXPECT_EQ(msg("run.steps=99999999999"), "--set run.steps=99999999999: value out of range");
  EXPECT_EQ(msg("nobody.x=1"), "--set nobody.x=1: no actor named 'nobody'");
  EXPECT_EQ(msg("stage.colour=1"),
            "--set stage.colour=1: kind 'toy_stage' has no parameter 'colour'");
  EXPECT_EQ(msg("stage.drop_every=many"),
            "--set stage.drop_every=many: expected int for 'drop_every'");
  // Lists: comma-separated texts or enumerants.
  EXPECT_EQ(
      msg("run.sinks=tensorboard,pages"),
      "--set run.sinks=tensorboard,pages: 'pages' is not one of tensorboard, prometheus, page");
  EXPECT_EQ(msg("run.sinks=tensorboard,page"), "<accepted>");
  auto sinks = g->reader().getRun().getSinks();
  ASSERT_EQ(sinks.size(), 2u);
  EXPECT_EQ(sinks[0], schema::Run::Sink::TENSORBOARD);
  EXPECT_EQ(sinks[1], schema::Run::Sink::PAGE);
  EXPECT_EQ(msg("run.chart=loss,total"), "<accepted>");
  ASSERT_EQ(g->reader().getRun().getChart().size(), 2u);
  EXPECT_EQ(std::string(g->reader().getRun().getChart()[1]), "total");
  EXPECT_EQ(msg("run.chart="), "<accepted>");
  EXPECT_EQ(g->reader().getRun().getChart().size(), 0u);
}

}  // namespace
}  // namespace milesrt::graph
