// End to end: what comes from outside ends neither a run nor the process, through the real
// milesrt executable on the tiny arithmetic setup: 100,000-deep JSON lines to `generate`,
// `score` and `tokenize`; a remote reward server (a real HTTP server on loopback) answering bytes
// that are not UTF-8; NaN weights and model files that are FIFOs or folders; a filter that drops
// every group. Each is refused (or ends the run) naming the line, URL, file, tensor or actor.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_server.hpp"
#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

const fs::path& setup_dir() { return shared_arith_setup("hostile-setup"); }

/// A copy of the setup's model folder in scratch(`tag`)/model, to spoil.
fs::path model_copy(const std::string& tag) {
  const fs::path d = scratch(tag) / "model";
  fs::remove_all(d);
  fs::copy(setup_dir() / "model", d, fs::copy_options::recursive);
  return d;
}

std::string deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// A 100,000-deep line overflowed the stack (SIGSEGV) where an error message quoted it: each
// subcommand now refuses that line by number and serves the next one.
TEST(HostileInputs, DeepJsonLinesAreRefusedAndTheOthersServed) {
  const std::string model = (setup_dir() / "model").string();
  struct command {
    std::string args, bad, good;
  };
  const std::vector<command> commands = {
      {"generate --model '" + model + "'", R"({"prompt_ids": )" + deep(100000) + "}",
       R"({"prompt_ids": [1, 2, 3], "max_new_tokens": 2})"},
      {"score --model '" + model + "'", R"({"ids": )" + deep(100000) + "}",
       R"({"ids": [1, 2, 3]})"},
      {"tokenize --model '" + model + "'", R"({"ids": )" + deep(100000) + "}",
       R"({"ids": [1, 2]})"},
  };
  for (const auto& c : commands) {
    const fs::path in = scratch("deep") / "in.jsonl";
    std::ofstream(in) << c.bad << "\n" << c.good << "\n";
    auto r = run_milesrt(c.args + " < '" + in.string() + "'", "deep-run");
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    std::istringstream lines(r.out);
    std::string first, second;
    std::getline(lines, first);
    std::getline(lines, second);
    EXPECT_EQ(first.rfind(R"({"error":"line 1: JSON nested deeper than 512 levels (at byte )", 0),
              0u)
        << c.args << ": " << first.substr(0, 200);
    EXPECT_FALSE(second.empty()) << c.args;
    EXPECT_EQ(second.find("error"), std::string::npos) << c.args << ": " << second;
  }
}

/// The GRPO graph with its reward actor asking `url` (no retries), written to `dir`.
fs::path remote_reward_graph(const fs::path& dir, const std::string& url) {
  std::string text = slurp(fs::path(source_dir()) / "graphs/grpo_sync.capnp");
  const std::string math = R"((name = "reward", kind = "math_reward"))";
  EXPECT_NE(text.find(math), std::string::npos);
  text.replace(text.find(math), math.size(),
               R"((name = "reward", kind = "remote_reward", params = (remoteReward = (url = ")" +
                   url + R"(", retries = 0))))");
  const fs::path g = dir / "remote.capnp";
  std::ofstream(g) << text;
  return g;
}

// A reward server answering bytes that are not UTF-8 made a JSON writer throw inside the driver:
// the run ended with "the schedule driver stopped without a result", the URL and the cause lost.
// Now it ends with exit 1 naming both, and summary.json holds the message, repaired.
TEST(HostileInputs, ARemoteRewardAnsweringBytesThatAreNotUtf8IsNamed) {
  milesrt::runtime::http_server server(0);
  server.route(milesrt::runtime::http_method::post, "/score",
               [](const milesrt::runtime::http_request&) {
                 return milesrt::runtime::http_response{200, "application/json", "[1, \xff\xfe]"};
               });
  server.start();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/score";
  const fs::path run = scratch("remote-utf8") / "run";
  const std::string s = setup_dir().string();
  auto r =
      run_milesrt("run '" + remote_reward_graph(run.parent_path(), url).string() + "' --run-dir '" +
                      run.string() +
                      "' --quiet --set run.steps=1 --set run.batchSize=2 --set rollout.model=" + s +
                      "/model --set trainer.model=" + s + "/model --set data.path=" + s +
                      "/rl.jsonl --set trainer.evalData=" + s + "/heldout.jsonl",
                  "remote-utf8-run");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("remote_reward: POST " + url +
                       ": the answer is not valid UTF-8: '[1, \xEF\xBF\xBD\xEF\xBF\xBD]'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("stopped without a result"), std::string::npos) << r.err;
  auto summary = nlohmann::json::parse(slurp(run / "summary.json"));
  EXPECT_NE(summary["error"].get<std::string>().find("POST " + url), std::string::npos);
  EXPECT_TRUE(milesrt::runtime::valid_utf8(r.err));
}

// NaN weights were served: exit 0 and "logprobs": [null]. Refused at load, naming the tensor.
TEST(HostileInputs, NonFiniteWeightsAreRefusedNamingTheTensor) {
  const fs::path model = model_copy("nan-weights");
  {
    std::fstream f(model / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, ' ');
    f.read(header.data(), static_cast<std::streamsize>(n));
    auto h = nlohmann::json::parse(header);
    ASSERT_EQ(h["model.norm.weight"]["dtype"], "F32");
    const uint64_t begin = h["model.norm.weight"]["data_offsets"][0];
    f.seekp(static_cast<std::streamoff>(8 + n + begin));
    const float nan = std::nanf("");
    f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  }
  const fs::path in = scratch("nan-weights") / "in.jsonl";
  std::ofstream(in) << R"({"prompt_ids": [1, 2, 3], "max_new_tokens": 2})"
                    << "\n";
  for (const std::string cmd : {"generate", "score"}) {
    auto r =
        run_milesrt(cmd + " --model '" + model.string() + "' < '" + in.string() + "'", "nan-run");
    EXPECT_EQ(r.status, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.err.find((model / "model.safetensors").string() +
                         ": tensor 'model.norm.weight' holds 1 non-finite value (NaN or inf)"),
              std::string::npos)
        << cmd << ": " << r.err;
  }
}

// A model file that is a FIFO blocked `generate` (for 60 s, until a deadline); a folder where the
// weights belong read as nothing. Each is refused at once, naming the file and what it is.
TEST(HostileInputs, ModelFilesThatAreNotRegularAreRefusedAtOnce) {
  const fs::path in = scratch("fifo-model") / "in.jsonl";
  std::ofstream(in) << R"({"prompt_ids": [1, 2, 3], "max_new_tokens": 2})"
                    << "\n";
  struct spoil {
    std::string command, file, what;
    bool fifo;
  };
  int n = 0;  // a scratch folder per run: start() reads the exit status left there
  // `generate` serves prompt_ids without a tokenizer; `tokenize` needs one.
  for (const auto& s :
       {spoil{"generate", "model.safetensors", "a FIFO, not a regular file", true},
        spoil{"generate", "config.json", "a FIFO, not a regular file", true},
        spoil{"tokenize", "tokenizer.json", "a FIFO, not a regular file", true},
        spoil{"generate", "model.safetensors", "a folder, not a regular file", false}}) {
    const fs::path model = model_copy("fifo-model");
    fs::remove(model / s.file);
    if (s.fifo) {
      ASSERT_EQ(::mkfifo((model / s.file).c_str(), 0600), 0);
    } else {
      fs::create_directories(model / s.file);
    }
    // start() runs ARGS inside sh -c '...': double quotes, so that the redirection is its own.
    auto b = start(s.command + " --model \"" + model.string() + "\" < \"" + in.string() + "\"",
                   "fifo-run-" + std::to_string(n++));
    auto r = b.wait(std::chrono::seconds(20));
    EXPECT_EQ(r.status, 2) << s.file << ": " << r.err;
    EXPECT_NE(r.err.find((model / s.file).string() + ": " + s.what), std::string::npos)
        << s.file << ": " << r.err;
  }
}

// A reward that gives every sample the same score makes the filter drop every group: the driver
// over-sampled for ever, without a step or a word. Past run.maxOverSampling x batchSize dropped
// groups the run ends (exit 1) naming the filter and the counts.
TEST(HostileInputs, AFilterThatDropsEveryGroupEndsTheRunNamingIt) {
  const fs::path run = scratch("over-sampling") / "run";
  const std::string s = setup_dir().string();
  auto b = start("run graphs/grpo_sync.capnp --run-dir \"" + run.string() +
                     "\" --quiet --set run.steps=2 --set run.batchSize=2 "
                     "--set run.maxOverSampling=3 --set reward.correct=0 --set rollout.model=" +
                     s + "/model --set trainer.model=" + s + "/model --set data.path=" + s +
                     "/rl.jsonl --set trainer.evalData=" + s + "/heldout.jsonl",
                 "over-sampling-run");
  auto r = b.wait(std::chrono::seconds(120));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("step 1 of 2: 7 of the "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("items admitted since step 0 were dropped on the way to the learner "
                       "(actor 'filter' (kind group_filter) dropped 7), more than "
                       "run.maxOverSampling x run.batchSize = 3 x 2"),
            std::string::npos)
      << r.err;
}

}  // namespace
