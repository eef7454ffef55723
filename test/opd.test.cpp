// End to end: graphs/opd.capnp (on-policy distillation, no reward) a few steps on a tiny arithmetic
// setup, through the real milesrt executable, with a local teacher and with the same teacher behind
// examples/teacher_server over HTTP: the same samples get the same teacher log-probs (each step's
// distill metrics agree within 1e-6), with no reward. A teacher of another tokenizer is refused at
// validation, naming the difference. GRPO, KL to a reference and distillation run together.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

const fs::path& student_setup() { return shared_arith_setup("opd-student"); }
/// Another model (other initial weights) with the same tokenizer: the teacher.
const fs::path& teacher_setup() {
  static fs::path dir = [] {
    fs::path d = scratch("opd-teacher");
    EXPECT_EQ(make_arith_setup(d, 64, 64, 8, "--seed 2"), 0);
    return d;
  }();
  return dir;
}

std::string opd_args(const fs::path& run, const std::string& teacher) {
  const std::string s = student_setup().string();
  return "run graphs/opd.capnp --quiet --set run.steps=2 --set run.batchSize=4 --run-dir '" +
         run.string() + "' --set data.path=" + s + "/rl.jsonl --set rollout.model=" + s +
         "/model --set trainer.model=" + s + "/model --set trainer.evalData=" + s +
         "/heldout.jsonl --set trainer.evalInterval=0 --set trainer.exportDir=" +
         (run / "export").string() + " --set teacher.student=" + s + "/model " + teacher;
}

/// Starts build/milesrt_teacher_server on a free port; returns its base URL (empty on failure).
std::string start_server(const fs::path& model, const fs::path& dir, int* pid) {
  const std::string cmd = "(sh -c 'echo $$ > \"" + (dir / "pid").string() + "\"; exec \"" +
                          MILESRT_TEACHER_SERVER + "\" --model \"" + model.string() +
                          "\" --port 0' > '" + (dir / "out").string() + "' 2>&1) &";
  std::system(cmd.c_str());
  const std::regex listening("on (http://127\\.0\\.0\\.1:[0-9]+)");
  for (int i = 0; i < 600; ++i) {
    std::smatch m;
    const std::string out = slurp(dir / "out");
    if (std::regex_search(out, m, listening)) {
      *pid = std::stoi(slurp(dir / "pid"));
      return m[1];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

TEST(OpdGraph, ARemoteTeacherGivesTheLocalTeachersMetrics) {
  const fs::path local = scratch("opd-local"), remote = scratch("opd-remote");
  const std::string t = teacher_setup().string() + "/model";
  auto a = run_milesrt(opd_args(local, "--set teacher.model=" + t), "opd-local-run");
  ASSERT_EQ(a.status, 0) << a.err;

  const fs::path server_dir = scratch("opd-server");
  int pid = 0;
  const std::string url = start_server(t, server_dir, &pid);
  ASSERT_FALSE(url.empty()) << slurp(server_dir / "out");
  auto b = run_milesrt(opd_args(remote, "--set teacher.model= --set teacher.url=" + url),
                       "opd-remote-run");
  ::kill(pid, SIGTERM);
  ASSERT_EQ(b.status, 0) << b.err;

  const auto sa = steps_of(local), sb = steps_of(remote);
  ASSERT_EQ(sa.size(), 2u);
  ASSERT_EQ(sb.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &ma = sa[i]["metrics"], &mb = sb[i]["metrics"];
    for (const char* k : {"distill_kl_mean", "distill_logprob_gap"}) {
      ASSERT_TRUE(ma.contains(k)) << ma.dump();
      EXPECT_NEAR(ma[k].get<double>(), mb[k].get<double>(), 1e-6) << k << " step " << i + 1;
    }
    // No reward actor: every reward is 0, distillation alone trains.
    EXPECT_EQ(ma["reward_mean"].get<double>(), 0.0);
    // Two different models: a real gap, and a reverse-KL estimate that is not zero.
    EXPECT_GT(std::abs(ma["distill_logprob_gap"].get<double>()), 1e-3);
  }
}

// GRPO, KL to a reference and distillation in one graph: the reward before the teacher (its
// `groups` port), a reference actor beside it; each term reports its own metric, from its own
// field (ref_logprobs: the student's starting model; teacher_logprobs: another model).
TEST(OpdGraph, GrpoKlToAReferenceAndDistillationCombine) {
  const fs::path dir = scratch("opd-combined");
  const std::string s = student_setup().string(), t = teacher_setup().string();
  const fs::path graph = dir / "combined.capnp";
  std::ofstream(graph) << R"(@0xd1c3a5e7f9b20461;
using import "/milesrt/graph.capnp".Graph;
const graph :Graph = (
  name = "grpo_kl_distill",
  actors = [
    (name = "data", kind = "data", params = (data = (path = ")"
                       << s << R"(/rl.jsonl"))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = ")"
                       << s << R"(/model", samplesPerPrompt = 4, maxNewTokens = 4))),
    (name = "reward", kind = "math_reward"),
    (name = "reference", kind = "reference", params = (reference = (model = ")"
                       << s << R"(/model"))),
    (name = "teacher", kind = "teacher",
     params = (teacher = (model = ")"
                       << t << R"(/model", student = ")" << s << R"(/model"))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = ")"
                       << s << R"(/model", klType = k3, klCoef = 0.1,
                          distillCoef = 0.5, distillEstimator = k3, lr = 1e-3))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "reference.groups"),
    (from = "reference.groups", to = "teacher.groups"),
    (from = "teacher.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 2, batchSize = 4, seed = 1, dir = ")"
                       << (dir / "run").string() << R"("),
);
)";
  auto r = run_milesrt("run '" + graph.string() + "' --quiet", "opd-combined-run");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto steps = steps_of(dir / "run");
  ASSERT_EQ(steps.size(), 2u);
  const auto& m = steps[0]["metrics"];
  for (const char* k : {"reward_mean", "kl_loss", "distill_kl_mean", "distill_logprob_gap"})
    EXPECT_TRUE(m.contains(k)) << k << " missing: " << m.dump();
  // Step 1 samples the starting model, its own reference: KL to it is 0 (k3 of equal log-probs);
  // the teacher is another model, so the distillation estimate is not.
  EXPECT_NEAR(m["kl_loss"].get<double>(), 0.0, 1e-6);
  EXPECT_GT(m["distill_kl_mean"].get<double>(), 1e-3);
}

TEST(OpdGraph, ATeacherOfAnotherTokenizerIsRefused) {
  // The teacher's folder with one vocabulary entry renamed.
  const fs::path other = scratch("opd-other-tokenizer");
  fs::copy(teacher_setup() / "model", other, fs::copy_options::recursive);
  auto tj = nlohmann::json::parse(slurp(other / "tokenizer.json"));
  auto& vocab = tj["model"]["vocab"];
  const std::string first = vocab.begin().key();
  const int64_t id = vocab.begin().value().get<int64_t>();
  vocab.erase(first);
  vocab["renamed"] = id;
  std::ofstream(other / "tokenizer.json") << tj.dump();
  const std::string s = student_setup().string();
  auto v = run_milesrt(
      "validate graphs/opd.capnp --set data.path=" + s + "/rl.jsonl --set rollout.model=" + s +
          "/model --set trainer.model=" + s + "/model --set trainer.evalData=" + s +
          "/heldout.jsonl --set teacher.student=" + s +
          "/model --set teacher.model=" + other.string(),
      "opd-validate");
  EXPECT_NE(v.status, 0);
  EXPECT_NE((v.out + v.err).find("the teacher's tokenizer differs from the student's"),
            std::string::npos)
      << v.out << v.err;
  EXPECT_NE((v.out + v.err).find("'renamed' in the teacher's"), std::string::npos)
      << v.out << v.err;
}

}  // namespace
