#include "actors/lib/weights/disk_delta.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/weights/tensor_hash.hpp"

namespace milesrt::weights {
namespace {
namespace fs = std::filesystem;

const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
    {"embed", {33, 16}},
    {"layers.0.attn.q", {16, 16}},
    {"layers.0.norm", {17}},
    {"layers.1.mlp.up", {3, 5, 7}},
    {"lm_head", {33, 16}}};

llm::flat_params make_params(at::ScalarType dtype, bool random) {
  llm::flat_params p(specs, dtype, at::kCPU);
  if (random) p.buffer().detach().copy_(at::randn({p.buffer().numel()}));
  return p;
}

// A small optimizer-like step on most tensors; one tensor is left alone, one redrawn.
void step(llm::flat_params& p) {
  auto b = p.buffer().detach();
  b.add_(at::randn(b.sizes()).to(b.scalar_type()) * 1e-3);
  p.get("layers.0.norm").detach().copy_(at::randn({17}));
}

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("milesrt_disk_delta_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

nlohmann::json manifest(const fs::path& vdir) {
  std::ifstream in(vdir / "manifest.json");
  return nlohmann::json::parse(in);
}

bool same(const llm::flat_params& a, const llm::flat_params& b) {
  return param_hashes(a) == param_hashes(b) && at::equal(a.buffer(), b.buffer());
}

TEST(DiskDelta, RoundTripsBitExactOverVersions) {
  temp_dir d;
  at::manual_seed(3);
  auto trainer = make_params(at::kBFloat16, true);
  auto engine = make_params(at::kBFloat16, false);
  delta_writer w(d.path, 4);
  delta_reader r;
  bool saw_xor = false;
  for (uint64_t v = 1; v <= 7; ++v) {
    if (v > 1) step(trainer);
    fs::path out = w.publish(trainer, v);
    EXPECT_EQ(out, d.path / ("v" + std::to_string(v)));
    auto m = manifest(out);
    // Full copies: the first, then every 4th publish after a full copy.
    bool full = v == 1 || v == 5;
    EXPECT_EQ(m["base"].is_null(), full) << "version " << v;
    for (const auto& t : m["tensors"]) saw_xor |= t["encoding"] == "xor";
    r.apply(engine, d.path, v - 1, v);
    ASSERT_TRUE(same(trainer, engine)) << "version " << v;
  }
  EXPECT_TRUE(saw_xor);
  // Pruned: the last two versions and the newest full copy remain.
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(d.path)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"v5", "v6", "v7"}));
}

void expect_error(delta_reader& r, llm::flat_params& p, const fs::path& dir, uint64_t have,
                  uint64_t version, const std::vector<std::string>& words) {
  auto before = param_hashes(p);
  try {
    r.apply(p, dir, have, version);
    ADD_FAILURE() << "no delta_error";
  } catch (const delta_error& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what() << " lacks " << w;
  }
  EXPECT_EQ(param_hashes(p), before) << "the model changed on a failed apply";
}

TEST(DiskDelta, CorruptDeltaIsDetectedAndLeavesTheModelUnchanged) {
  temp_dir d;
  at::manual_seed(4);
  auto trainer = make_params(at::kFloat, true);
  auto engine = make_params(at::kFloat, false);
  delta_writer w(d.path, 0);
  delta_reader r;
  w.publish(trainer, 1);
  r.apply(engine, d.path, 0, 1);
  step(trainer);
  fs::path v2 = w.publish(trainer, 2);
  fs::path backup = d.path / "backup";
  fs::copy(v2, backup);
  auto restore = [&] {
    fs::remove_all(v2);
    fs::copy(backup, v2);
  };
  auto m = manifest(v2);
  // Tensor 3 (layers.1.mlp.up): a small step, so xor-encoded.
  const std::string file = m["tensors"][3]["file"];
  const fs::path f = v2 / file;
  const std::string tensor = "layers.1.mlp.up";

  {  // one flipped byte in a compressed file
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(fs::file_size(f) / 2);
    char c;
    io.get(c);
    io.seekp(fs::file_size(f) / 2);
    io.put(static_cast<char>(c ^ 0x10));
  }
  expect_error(r, engine, d.path, 1, 2, {"version 2", tensor, file, "checksum"});
  restore();
  fs::resize_file(f, fs::file_size(f) - 3);
  expect_error(r, engine, d.path, 1, 2, {"version 2", tensor, file, "size mismatch"});
  restore();
  fs::remove(f);
  expect_error(r, engine, d.path, 1, 2, {"version 2", tensor, file, "missing"});
  restore();
  {  // garbage that the manifest vouches for: only zstd can tell
    std::string junk(64, 'x');
    std::ofstream(f, std::ios::binary) << junk;
    m["tensors"][3]["compressed_bytes"] = junk.size();
    char h[17];
    std::snprintf(h, sizeof(h), "%016llx",
                  static_cast<unsigned long long>(bytes_hash(junk.data(), junk.size())));
    m["tensors"][3]["compressed_xxh3"] = h;
    std::ofstream(v2 / "manifest.json") << m.dump();
  }
  expect_error(r, engine, d.path, 1, 2, {"version 2", tensor, file, "zstd"});
  restore();
  fs::remove(v2 / "manifest.json");
  expect_error(r, engine, d.path, 1, 2, {"version 2", "manifest.json"});
  restore();
  expect_error(r, engine, d.path, 0, 2, {"version 2", "delta on version 1", "holds version 0"});
  expect_error(r, engine, d.path, 2, 9, {"version 9", "missing directory"});
  {  // the right base number but other weights: the result's checksum catches it
    auto stranger = make_params(at::kFloat, true);
    expect_error(r, stranger, d.path, 1, 2, {"version 2", "checksum mismatch of the resulting"});
  }
  {  // a model of another size
    llm::flat_params other({{"embed", {3}}}, at::kFloat, at::kCPU);
    expect_error(r, other, d.path, 1, 2, {"version 2", "tensors"});
  }
  r.apply(engine, d.path, 1, 2);  // intact again
  EXPECT_TRUE(same(trainer, engine));
}

TEST(DiskDelta, FullCopyWhenAnEngineFallsBehind) {
  temp_dir d;
  at::manual_seed(5);
  auto trainer = make_params(at::kFloat, true);
  auto engine = make_params(at::kFloat, false);
  delta_writer w(d.path, 0);
  delta_reader r;
  w.publish(trainer, 1);
  r.apply(engine, d.path, 0, 1);
  for (uint64_t v = 2; v <= 4; ++v) {
    step(trainer);
    w.publish(trainer, v);
  }
  EXPECT_FALSE(fs::exists(d.path / "v2"));  // pruned: v3, v4 and the full v1 remain
  EXPECT_TRUE(fs::exists(d.path / "v1"));
  expect_error(r, engine, d.path, 1, 4, {"version 4", "delta on version 3"});
  EXPECT_THROW(r.apply_full(engine, d.path, 4), delta_error);  // v4 is a delta
  EXPECT_EQ(w.write_full(trainer, 4), d.path / "v4-full");
  r.apply_full(engine, d.path, 4);
  EXPECT_TRUE(same(trainer, engine));
  EXPECT_FALSE(fs::exists(d.path / "v1"));  // v4-full is now the newest full copy
  step(trainer);
  w.publish(trainer, 5);
  r.apply(engine, d.path, 4, 5);
  EXPECT_TRUE(same(trainer, engine));
  EXPECT_THROW(w.publish(trainer, 5), delta_error);  // versions only go up
}

}  // namespace
}  // namespace milesrt::weights
