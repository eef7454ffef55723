// Fuzz, end to end: the real milesrt executable on mutated inputs (graph files, JSON lines for
// tokenize / score / generate, model folders), seeded and bounded in time. Each run is in a child
// under a memory limit (RLIMIT_AS) and a time limit; it must end with 0, 1 or 2, never a signal or
// a timeout, with a short stderr and no stack trace. A failing input is kept under
// build/test/fuzz-failures/ with the command that reproduces it.
#include "test/support/fuzz.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

uint64_t seed() { return fuzz_seed(); }
std::chrono::seconds budget() { return fuzz_budget(25); }
/// Cases of the default seed that fail on a known open defect: not run by the random tests, each
/// kept as a named test that is skipped until its defect is fixed (none open now).
const std::map<std::string, std::string> kOpenDefects = {};
/// Each case's limits: 20 s, 4 GiB of address space.
const run_limits kLimits{};
using rng = fuzz_rng;

/// Files of one case, kept when it fails.
struct fuzz_case {
  std::string name;
  std::vector<std::string> args;
  fs::path input;  ///< stdin ("" for none)
};

/// The shared cwd: the arithmetic setup where graphs look for it (runs/arith/...).
const fs::path& work_dir() {
  static fs::path dir = [] {
    fs::path d = scratch("fuzz-cwd");
    const fs::path setup = d / "runs" / "arith" / "setup";
    if (!fs::exists(setup / "rl.jsonl")) {
      EXPECT_EQ(make_arith_setup(setup, 16, 16, 4), 0);
      fs::copy(setup / "model", d / "runs" / "arith" / "sft_model", fs::copy_options::recursive);
    }
    return d;
  }();
  return dir;
}

/// Runs a case and checks it; on failure the case's files are copied into fuzz-failures/NAME.
void check_case(const fuzz_case& c, const std::vector<fs::path>& keep = {}) {
  if (seed() == 20261205 && kOpenDefects.count(c.name)) {
    std::cout << c.name << ": not run (an open defect: " << kOpenDefects.at(c.name) << ")\n";
    return;
  }
  const auto o = run_limited(c.args, work_dir(), c.input, scratch("fuzz-run"), kLimits);
  const auto problem = problem_of(o, kLimits);
  if (problem.empty()) return;
  const fs::path kept = fs::path(MILESRT_BINARY_DIR) / "test" / "fuzz-failures" / c.name;
  fs::create_directories(kept);
  std::string cmd = "cd '" + work_dir().string() + "' && milesrt";
  for (const auto& a : c.args) cmd += " '" + a + "'";
  if (!c.input.empty()) {
    fs::copy_file(c.input, kept / "stdin", fs::copy_options::overwrite_existing);
    cmd += " < '" + (kept / "stdin").string() + "'";
  }
  for (const auto& k : keep) {
    fs::copy(k, kept / k.filename(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  std::ofstream(kept / "command") << cmd << "\n";
  ADD_FAILURE() << c.name << ": " << problem << "\n  input kept in " << kept.string()
                << "\n  command: " << cmd << "\n  stderr (first 2000 bytes):\n"
                << o.err.substr(0, 2000);
}

// ---- mutations ---------------------------------------------------------------------------

/// Runs `make(i)` for case i = 0.. until `count` cases or the time budget are done.
template <typename F>
void fuzz_for(const char* what, int count, F make) {
  const auto until = std::chrono::steady_clock::now() + budget();
  int done = 0;
  for (; done < count && std::chrono::steady_clock::now() < until; ++done) make(done);
  std::cout << what << ": " << done << " of " << count << " cases in the time budget (seed "
            << seed() << ")\n";
}

// ---- graph files -------------------------------------------------------------------------

const std::vector<std::string> kCapnpTokens = {"=",
                                               ",",
                                               "(",
                                               ")",
                                               "[",
                                               "]",
                                               "\"",
                                               "#",
                                               ";",
                                               "const",
                                               "import",
                                               "placement = \"w\"",
                                               "kind = \"x\"",
                                               "0x",
                                               "\\",
                                               "\n",
                                               "void",
                                               "::",
                                               "$",
                                               "@0"};

std::vector<fs::path> seed_graphs() {
  const fs::path src = source_dir();
  std::vector<fs::path> out;
  for (const auto& d : {src / "graphs", src / "examples" / "toy"})
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().extension() == ".capnp") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Fuzz, MutatedGraphFilesAreRefusedCleanly) {
  const auto graphs = seed_graphs();
  ASSERT_FALSE(graphs.empty());
  rng r(seed());
  const fs::path dir = work_dir() / "fuzz-graphs";
  fs::create_directories(dir);
  fuzz_for("graph files", 60, [&](int i) {
    const auto& from = graphs[pick(r, graphs.size())];
    const fs::path file = dir / ("g" + std::to_string(i) + ".capnp");
    std::ofstream(file) << mutate(slurp(from), r, kCapnpTokens);
    const bool validate = pick(r, 4) != 0;
    check_case({"graph-" + std::to_string(i) + "-" + from.stem().string(),
                validate ? std::vector<std::string>{"validate", file.string()}
                         : std::vector<std::string>{"graph", file.string(), "--dot"},
                ""},
               {file});
  });
}

// ---- JSON lines --------------------------------------------------------------------------

const std::vector<std::string> kJsonTokens = {
    "{", "}", "[", "]", ",", ":", "\"", "null", "true", "1e999", "-0", "\\u0000", "\\ud800"};

/// Valid lines of each command on the arithmetic model (16 ids).
const std::map<std::string, std::vector<std::string>> kLines = {
    {"tokenize",
     {R"({"text": "1+2=3", "add_special_tokens": false})", R"({"ids": [1, 2, 15]})",
      R"({"ids": [1, 2], "skip_special_tokens": true})"}},
    {"score", {R"({"ids": [1, 10, 2, 11, 3], "temperature": 1.0})", R"({"ids": [4, 5]})"}},
    {"generate",
     {R"({"prompt": "1+2=", "max_new_tokens": 3, "n": 2, "seed": 3})",
      R"({"prompt_ids": [1, 10, 2, 11], "max_new_tokens": 2, "temperature": 0.5, "top_k": 4})",
      R"({"prompt": "3+4=", "max_new_tokens": 2, "top_p": 0.9, "ignore_eos": true})"}},
};

/// A JSON value replacing one of a request's values: sizes, types, strings.
nlohmann::json odd_value(rng& r) {
  switch (pick(r, 9)) {
    case 0:
      return 1e308;
    case 1:
      return -1;
    case 2:
      return 1000000000;
    case 3:
      return nullptr;
    case 4:
      return std::string(1 + pick(r, 200000), 'x');
    case 5:
      return nlohmann::json::array({-5, 99999, 3});
    case 6:
      return nlohmann::json::object({{"a", 1}});
    case 7:
      return 0;
    default:
      return std::numeric_limits<int64_t>::max();
  }
}

/// A request with one field set to an odd value (parsed, then written back).
std::string odd_request(const std::string& line, rng& r) {
  auto j = nlohmann::json::parse(line);
  std::vector<std::string> keys;
  for (auto& [k, v] : j.items()) keys.push_back(k);
  static const std::vector<std::string> extra = {"max_new_tokens", "n",    "top_k", "top_p",
                                                 "temperature",    "seed", "ids",   "prompt_ids",
                                                 "messages",       "text"};
  const auto key = pick(r, 3) == 0 ? extra[pick(r, extra.size())] : keys[pick(r, keys.size())];
  j[key] = odd_value(r);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(Fuzz, MutatedRequestLinesAreAnsweredCleanly) {
  rng r(seed() + 1);
  const fs::path model = work_dir() / "runs" / "arith" / "setup" / "model";
  const fs::path dir = work_dir() / "fuzz-lines";
  fs::create_directories(dir);
  fuzz_for("request lines", 45, [&](int i) {
    auto it = kLines.begin();
    std::advance(it, pick(r, kLines.size()));
    const auto& [command, base] = *it;
    std::string text;
    for (size_t n = 0, lines_n = 1 + pick(r, 3); n < lines_n; ++n) {
      const auto& line = base[pick(r, base.size())];
      text += (pick(r, 2) == 0 ? odd_request(line, r) : mutate(line, r, kJsonTokens)) + "\n";
    }
    const fs::path file = dir / ("in" + std::to_string(i) + ".jsonl");
    std::ofstream(file) << text;
    check_case(
        {"lines-" + std::to_string(i) + "-" + command, {command, "--model", model.string()}, file});
  });
}

// ---- model folders -----------------------------------------------------------------------

TEST(Fuzz, MutatedModelFoldersAreRefusedCleanly) {
  rng r(seed() + 2);
  const fs::path setup = work_dir() / "runs" / "arith" / "setup";
  const auto config = nlohmann::json::parse(slurp(setup / "model" / "config.json"));
  std::vector<std::string> keys;
  for (auto& [k, v] : config.items()) keys.push_back(k);
  const fs::path graph = fs::path(source_dir()) / "graphs" / "grpo_sync.capnp";
  const fs::path score_in = work_dir() / "fuzz-score.jsonl";
  std::ofstream(score_in) << R"({"ids": [1, 10, 2, 11, 3]})"
                          << "\n";
  fuzz_for("model folders", 40, [&](int i) {
    // The graph's model (runs/arith/sft_model) is the mutated copy.
    const fs::path model = work_dir() / "runs" / "arith" / "sft_model";
    fs::remove_all(model);
    fs::copy(setup / "model", model, fs::copy_options::recursive);
    auto c = config;
    for (size_t n = 0, k = 1 + pick(r, 2); n < k; ++n) {
      const auto& key = keys[pick(r, keys.size())];
      if (pick(r, 6) == 0) {
        c.erase(key);
      } else {
        c[key] = odd_value(r);
      }
    }
    std::ofstream(model / "config.json")
        << c.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    const bool score = pick(r, 2) == 0;
    check_case({"model-" + std::to_string(i) + (score ? "-score" : "-validate"),
                score ? std::vector<std::string>{"score", "--model", model.string()}
                      : std::vector<std::string>{"validate", graph.string()},
                score ? score_in : fs::path()},
               {model / "config.json"});
  });
}

// ---- named cases: failing inputs the fuzz found ----------------------------------------------

/// A graph with many broken lines (graph-20 of seed 7 printed 7 parse errors): at most five
/// errors and a count are printed.
TEST(Fuzz, ManyParseErrorsAreCappedAtFiveLines) {
  const fs::path file = work_dir() / "fuzz-many-errors.capnp";
  std::string text = slurp(fs::path(source_dir()) / "examples" / "toy" / "toy_sync.capnp");
  // Every edge's fields misspelled: two errors an edge.
  for (const std::string field : {"from = ", "to = "})
    for (size_t at; (at = text.find(field)) != std::string::npos;)
      text.replace(at, field.size(), "x" + field.substr(0, field.size() - 3) + "x = ");
  std::ofstream(file) << text;
  const auto o = run_limited({"validate", file.string()}, work_dir(), "", scratch("fuzz-run"));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_LE(lines(o.err), 6u) << o.err;
  EXPECT_NE(o.err.find("more error(s) not shown (fix the first ones first)"), std::string::npos)
      << o.err;
  check_case({"many-parse-errors", {"validate", file.string()}, ""}, {file});
}

/// `milesrt generate` with max_new_tokens 2^63-1 (lines-43-generate of seed 7) must refuse the
/// line or stop at the model's context (it once ran past the 20 s limit).
TEST(Fuzz, AHugeMaxNewTokensEndsPromptly) {
  const fs::path in = work_dir() / "fuzz-huge-max-new.jsonl";
  std::ofstream(in) << R"({"max_new_tokens": 9223372036854775807, "prompt_ids": [1, 10, 2, 11],)"
                    << R"( "temperature": 0.5, "top_k": 4})"
                    << "\n";
  check_case({"huge-max-new-tokens",
              {"generate", "--model", (work_dir() / "runs" / "arith" / "setup" / "model").string()},
              in});
}

/// A model folder whose config.json says hidden_size 1e9 (model-28-score of the default seed):
/// `milesrt score` must refuse the size in one line (it once printed libtorch's allocation failure
/// with its stack frames, "frame #0: c10::ThrowEnforceNotMet ...").
TEST(Fuzz, AHugeHiddenSizeIsRefusedWithoutAStackTrace) {
  const fs::path model = work_dir() / "fuzz-huge-hidden";
  fs::remove_all(model);
  fs::copy(work_dir() / "runs" / "arith" / "setup" / "model", model, fs::copy_options::recursive);
  auto config = nlohmann::json::parse(slurp(model / "config.json"));
  config["hidden_size"] = 1000000000;
  std::ofstream(model / "config.json") << config.dump(2);
  const fs::path in = work_dir() / "fuzz-huge-hidden.jsonl";
  std::ofstream(in) << R"({"ids": [1, 10, 2, 11, 3]})"
                    << "\n";
  check_case({"huge-hidden-size", {"score", "--model", model.string()}, in}, {model});
}

}  // namespace
