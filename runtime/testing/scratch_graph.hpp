#pragma once
// Helpers for the runtime's tests: graph files written to a scratch folder and loaded with the
// toy kinds registered.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/graph/loader.hpp"
#include "runtime/testing/toy_kinds.hpp"

namespace milesrt::testing {

/// A scratch folder per test, removed afterwards.
class scratch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("milesrt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    toy::register_kinds(kinds_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Writes a graph file whose body is `graph_fields` inside `const graph :Graph = (...)`.
  std::filesystem::path write_graph(const std::string& name, const std::string& graph_fields) {
    auto p = dir_ / name;
    std::ofstream(p) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                     << "const graph :Graph = (" << graph_fields << ");\n";
    return p;
  }

  std::unique_ptr<graph::loaded_graph> load(const std::string& name, const std::string& fields) {
    auto r = graph::load_graph(write_graph(name, fields), graph::default_import_dirs());
    EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].text());
    return std::move(r.graph);
  }

  std::filesystem::path dir_;
  runtime::kind_registry kinds_;
};

/// The usual toy pipeline: src -> stage -> learner -> stage.weights.
inline std::string toy_graph(const std::string& stage_extra, const std::string& schedule,
                             const std::string& run) {
  return R"(name = "toy",
  actors = [(name = "src", kind = "toy_source"),
            (name = "stage", kind = "toy_stage")" +
         stage_extra + R"(),
            (name = "learner", kind = "toy_learner")],
  edges = [(from = "src.items", to = "stage.items"),
           (from = "stage.items", to = "learner.items"),
           (from = "learner.weights", to = "stage.weights")],
  schedule = )" +
         schedule + ",\n  run = " + run;
}

}  // namespace milesrt::testing
