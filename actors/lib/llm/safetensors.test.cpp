#include "actors/lib/llm/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

namespace milesrt::llm {
namespace {
namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("milesrt-st-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// A file with a hand-written header and `data_bytes` bytes of data.
  fs::path raw(const std::string& header, size_t data_bytes, int64_t claimed_len = -1) {
    auto p = dir_ / "raw.safetensors";
    std::ofstream out(p, std::ios::binary);
    uint64_t n = claimed_len >= 0 ? uint64_t(claimed_len) : header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << std::string(data_bytes, '\x01');
    return p;
  }

  std::string error_of(const fs::path& p) {
    try {
      safetensors_checkpoint c(p);
      return "<accepted>";
    } catch (const safetensors_error& e) {
      return e.what();
    }
  }

  fs::path dir_;
};

TEST_F(Safetensors, WritesAndReadsBack) {
  std::vector<float> a = {1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f};
  std::vector<uint16_t> b = {0x3f80, 0x4000};  // bf16 1.0, 2.0
  write_safetensors(
      dir_, {{"a", dtype::f32, {2, 3}, a.data(), 24}, {"b", dtype::bf16, {2}, b.data(), 4}});
  safetensors_checkpoint c(dir_);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b"}));
  const auto& ta = c.get("a");
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta.data, a.data(), 24), 0);
  EXPECT_EQ(c.get("b").type, dtype::bf16);
  EXPECT_EQ(error_of(dir_ / "model.safetensors"), "<accepted>");
  try {
    c.get("nope");
    FAIL();
  } catch (const safetensors_error& e) {
    EXPECT_EQ(std::string(e.what()), dir_.string() + ": missing tensor 'nope'");
  }
}

TEST_F(Safetensors, ShardsWithAnIndex) {
  std::vector<float> x(100, 1.f), y(100, 2.f), z(100, 3.f);
  write_safetensors(dir_,
                    {{"x", dtype::f32, {100}, x.data(), 400},
                     {"y", dtype::f32, {100}, y.data(), 400},
                     {"z", dtype::f32, {100}, z.data(), 400}},
                    /*max_shard_bytes=*/800);
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir_ / "model-00002-of-00002.safetensors"));
  safetensors_checkpoint c(dir_);
  EXPECT_EQ(reinterpret_cast<const float*>(c.get("z").data)[99], 3.f);
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  EXPECT_EQ(error_of(dir_), (dir_ / "model-00002-of-00002.safetensors").string() +
                                ": missing (listed in the index)");
}

TEST_F(Safetensors, BadFilesAreRefusedWithTheirNames) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(error_of(raw(ok, 8)), "<accepted>");
  auto f = (dir_ / "raw.safetensors").string() + ": ";
  EXPECT_EQ(error_of(raw(ok, 4)),
            f + "tensor 'w': data_offsets [0, 8] run past the end of the data (4 bytes)");
  EXPECT_EQ(error_of(raw(ok, 8, 1000)), f + "header length 1000 runs past the end of the file (" +
                                            std::to_string(8 + ok.size() + 8) + " bytes)");
  EXPECT_EQ(error_of(raw(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 2)),
            f + "tensor 'w': dtype I8 is not supported (F32, F16, BF16)");
  EXPECT_EQ(error_of(raw(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
            f + "tensor 'w': holds 8 bytes but its shape and dtype need 12");
  EXPECT_EQ(error_of(raw(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)),
            f + "tensor 'w': data_offsets [8, 0] are reversed");
  EXPECT_EQ(error_of(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12)),
            f + "tensors 'a' and 'b' overlap");
  EXPECT_NE(error_of(raw("{not json", 0)).find(f + "header is not valid JSON"), std::string::npos);
  std::ofstream(dir_ / "short.safetensors") << "abc";
  EXPECT_EQ(
      error_of(dir_ / "short.safetensors"),
      (dir_ / "short.safetensors").string() + ": too short for a safetensors header (3 bytes)");
  EXPECT_EQ(error_of(dir_ / "nothing.safetensors"),
            (dir_ / "nothing.safetensors").string() + ": no such file");
}

// A small in-process fuzz run of the header parser (the libFuzzer target is safetensors_fuzz.cpp):
// mutated headers must be refused with safetensors_error, never crash or be misread.
TEST_F(Safetensors, MutatedHeadersNeverCrashTheParser) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("v":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  std::vector<uint8_t> file(8 + header.size() + 12, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = (n >> (8 * i)) & 0xff;
  std::memcpy(file.data() + 8, header.data(), header.size());
  std::mt19937 rng(1234);
  size_t accepted = 0, refused = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto m = file;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) m.resize(rng() % m.size());
    try {
      auto h = parse_safetensors_header(m.data(), m.size(), m.size(), "fuzz");
      for (auto& [name, t] : h.tensors) ASSERT_LE(t.end, m.size() - 8 - h.header_size);
      ++accepted;
    } catch (const safetensors_error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000u);
  EXPECT_GT(accepted, 10u);
}

}  // namespace
}  // namespace milesrt::llm
