// policy_trainer with LoRA on tiny CPU fp32 models: only the adapters train (the base stays
// bitwise), the optimizer and master weights hold the adapters alone, a bitwise resume from a
// checkpoint of adapters, a resume against another base refused naming both, the KL reference is
// the base with the adapters off, and an engine fed the published adapters through each transport
// samples with them: its log-probs change and equal the trainer's bit for bit.
#include "actors/lib/llm/lora.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/serving/engine.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "actors/lib/weights/transport.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {
namespace {
namespace fs = std::filesystem;
using Transport = schema::PublisherParams::Transport;

llm::lora_config lora(int64_t rank = 4) {
  llm::lora_config c;
  c.rank = rank;
  c.alpha = 8;
  c.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return c;
}

/// The tiny model (base seed `base`) with fresh adapters attached.
std::unique_ptr<llm::decoder> adapted(uint64_t base = 5, const llm::lora_config& c = lora()) {
  auto m = llm::testing::tiny_model(base);
  m->set_adapters(llm::make_adapters(m->config(), c, at::kFloat, at::kCPU, 3), c);
  return m;
}

trainer_options options(const std::string& base = "models/base-5") {
  trainer_options o;
  o.optimizer.lr = 2e-2;
  o.optimizer.warmup_steps = 1;
  o.optimizer.schedule = "cosine";
  o.optimizer.total_steps = 8;
  o.micro_batch_tokens = 24;  // several micro-batches per step
  o.base_model = base;
  return o;
}

std::vector<int64_t> tokens(int len, int salt) {
  std::vector<int64_t> v;
  for (int i = 0; i < len; ++i) v.push_back((i * 7 + salt * 11 + 3) % 32);
  return v;
}

std::vector<train_sequence> rl_batch(int salt) {
  std::vector<train_sequence> b;
  for (int i = 0; i < 6; ++i) {
    train_sequence s;
    s.prompt = tokens(5 + (i / 3) * 4, salt + i);
    s.output = tokens(2 + i, salt + i + 5);
    s.rollout_logprobs.assign(s.output.size(), -3.0f);
    s.reward = static_cast<float>((i + salt) % 3 == 0);
    s.group = i / 3;
    b.push_back(std::move(s));
  }
  return b;
}

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("milesrt_trainer_lora_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

at::Tensor copy_of(const llm::flat_params& p) { return p.buffer().detach().clone(); }

TEST(TrainerLora, OnlyTheAdaptersTrainAndTheBaseStaysBitwise) {
  policy_trainer t(adapted(), options());
  const auto base = copy_of(t.model().params());
  const auto adapters = copy_of(*t.model().adapters());
  // The optimizer's master weights are the adapters' (fp32: their own buffer), nothing of the base.
  EXPECT_EQ(t.master_weights().numel(), adapters.numel());
  EXPECT_EQ(t.master_weights().data_ptr(), t.model().adapters()->buffer().data_ptr());
  EXPECT_FALSE(t.model().params().grad().defined());
  for (int step = 0; step < 2; ++step) {
    auto m = t.train(rl_batch(step));
    EXPECT_GT(m["grad_norm"], 0.0);
  }
  EXPECT_TRUE(at::equal(base, t.model().params().buffer().detach())) << "the base moved";
  EXPECT_FALSE(at::equal(adapters, t.model().adapters()->buffer().detach()));
  EXPECT_EQ(t.base_hash(), lora_base_hash(llm::testing::tiny_model(5)->params()));
  EXPECT_NE(t.base_hash(), lora_base_hash(llm::testing::tiny_model(6)->params()));
}

TEST(TrainerLora, ResumeIsBitwiseAndAnotherBaseIsRefusedNamingBoth) {
  temp_dir d;
  std::vector<std::vector<train_sequence>> batches = {rl_batch(0), rl_batch(1), rl_batch(2),
                                                      rl_batch(3)};
  policy_trainer a(adapted(), options());
  for (const auto& b : batches) a.train(b);
  {
    policy_trainer b(adapted(), options());
    b.train(batches[0]);
    b.train(batches[1]);
    b.save(d.path);
  }
  EXPECT_FALSE(fs::exists(d.path / "model")) << "a LoRA checkpoint holds the adapters only";
  EXPECT_EQ(fs::file_size(d.path / "master.bin"),
            static_cast<uintmax_t>(a.model().adapters()->buffer().nbytes()));
  policy_trainer c(adapted(), options());
  c.load(d.path);
  EXPECT_EQ(c.optimizer_steps(), 2u);
  for (int step = 2; step < 4; ++step) c.train(batches[step]);
  const auto& x = a.model().adapters()->buffer();
  const auto& y = c.model().adapters()->buffer();
  ASSERT_EQ(x.nbytes(), y.nbytes());
  EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << "resume is not bitwise";

  // Another base: refused, naming both folders and hashes.
  policy_trainer other(adapted(6), options("models/base-6"));
  try {
    other.load(d.path);
    ADD_FAILURE() << "a checkpoint of another base was accepted";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'models/base-5'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'models/base-6'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(other.base_hash()), std::string::npos) << msg;
  }
  // Other settings: refused naming the field.
  policy_trainer ranked(adapted(5, lora(8)), options());
  try {
    ranked.load(d.path);
    ADD_FAILURE() << "a checkpoint of rank 4 was accepted at rank 8";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("lora.rank is 4 there, 8 in this run"), std::string::npos)
        << e.what();
  }
  // A trainer without LoRA does not take a checkpoint of adapters.
  policy_trainer full(llm::testing::tiny_model(5), {});
  try {
    full.load(d.path);
    ADD_FAILURE() << "a full trainer resumed from adapters";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("lora.json"), std::string::npos) << e.what();
  }
}

// A checkpoint's adapters of NaN would be trained on without a word after a resume: refused,
// naming master.bin and the tensor; a lora.json that is a FIFO is refused without opening it.
TEST(TrainerLora, ACheckpointOfNonFiniteAdaptersIsRefused) {
  temp_dir d;
  {
    policy_trainer a(adapted(), options());
    a.train(rl_batch(0));
    a.save(d.path);
  }
  const auto first = adapted()->adapters()->names().front();
  {
    std::fstream f(d.path / "master.bin", std::ios::in | std::ios::out | std::ios::binary);
    const float nan = std::nanf("");
    f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  }
  policy_trainer c(adapted(), options());
  try {
    c.load(d.path);
    ADD_FAILURE() << "NaN adapters were resumed";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), (d.path / "master.bin").string() + ": tensor '" + first +
                                         "' holds 1 non-finite value (NaN or inf)");
  }
  fs::remove(d.path / "lora.json");
  ASSERT_EQ(::mkfifo((d.path / "lora.json").c_str(), 0600), 0);
  try {
    c.load(d.path);
    ADD_FAILURE() << "a FIFO was read as lora.json";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              (d.path / "lora.json").string() + ": a FIFO, not a regular file");
  }
}

// Where the graph says so (loraBaseReference), the KL reference of a LoRA trainer is its own
// base with the adapters off: a batch without reference log-probs trains exactly as the same
// batch carrying the base model's log-probs.
TEST(TrainerLora, TheKlReferenceIsTheBaseWithTheAdaptersOff) {
  auto o = options();
  o.loss.kl = rl::kl_estimator::k3;
  o.loss.kl_coef = 0.5;
  o.lora_base_reference = true;
  policy_trainer inside(adapted(), o), given(adapted(), o);
  // Both take one step first, so that the adapters differ from the base.
  inside.train(rl_batch(7));
  auto warm = rl_batch(7);
  {
    auto base = llm::testing::tiny_model(5);
    at::NoGradGuard no_grad;
    for (auto& s : warm) {
      auto full = s.prompt;
      full.insert(full.end(), s.output.begin(), s.output.end());
      auto lp = base->score_sequences({full}, 1.0)[0].logprobs.contiguous();
      const int64_t n = static_cast<int64_t>(s.output.size());
      s.ref_logprobs.assign(lp.data_ptr<float>() + lp.numel() - n,
                            lp.data_ptr<float>() + lp.numel());
    }
  }
  given.train(warm);
  auto batch = rl_batch(8);
  auto mi = inside.train(batch);
  for (auto& s : batch) {
    auto full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    at::NoGradGuard no_grad;
    auto lp = llm::testing::tiny_model(5)->score_sequences({full}, 1.0)[0].logprobs.contiguous();
    const int64_t n = static_cast<int64_t>(s.output.size());
    s.ref_logprobs.assign(lp.data_ptr<float>() + lp.numel() - n, lp.data_ptr<float>() + lp.numel());
  }
  auto mg = given.train(batch);
  EXPECT_GT(mi["kl_loss"], 0.0);
  EXPECT_EQ(mi["kl_loss"], mg["kl_loss"]);
  EXPECT_TRUE(at::equal(inside.model().adapters()->buffer(), given.model().adapters()->buffer()));
}

// Unasked, the base is no reference: a KL batch without reference log-probs is refused, naming
// the two ways out; a distillation batch needs a teacher's log-probs, never the base's.
TEST(TrainerLora, TheBaseIsTheReferenceOnlyWhenTheGraphSaysSo) {
  auto o = options();
  o.loss.kl = rl::kl_estimator::k3;
  o.loss.kl_coef = 0.5;
  policy_trainer t(adapted(), o);
  try {
    t.train(rl_batch(7));
    FAIL() << "a KL batch without reference log-probs trained";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("set loraBaseReference"), std::string::npos) << e.what();
  }
  auto od = options();
  od.loss.distill_coef = 1;
  od.lora_base_reference = true;
  policy_trainer d(adapted(), od);
  try {
    d.train(rl_batch(7));
    FAIL() << "a distillation batch without teacher log-probs trained";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("add a teacher actor"), std::string::npos) << e.what();
  }
}

/// The engine's samples of two prompts (fixed seeds), as a training batch.
std::vector<train_sequence> sample(serving::engine& e) {
  for (uint64_t id = 0; id < 2; ++id) {
    serving::generate_request r;
    r.id = id;
    r.prompt = tokens(id == 0 ? 5 : 11, static_cast<int>(id));
    r.params.n = 3;
    r.params.max_new_tokens = 6;
    r.params.seed = 17 + id;
    e.add(r);
  }
  std::vector<train_sequence> batch;
  for (const auto& s : e.run()) {
    train_sequence x;
    x.prompt = s.prompt;
    x.output = s.output;
    x.rollout_logprobs = s.logprobs;
    x.reward = static_cast<float>(s.index == 0);
    x.group = static_cast<int64_t>(s.request_id);
    batch.push_back(std::move(x));
  }
  return batch;
}

class PublishedAdapters : public ::testing::TestWithParam<std::string> {};

// An engine with its own copy of the base and of the adapters (an async engine in another actor
// or process) gets each version of the adapters through the transport, adapters only: what it
// samples after a publication has other log-probs than before, and the trainer's log-probs of
// those samples equal the engine's bit for bit.
TEST_P(PublishedAdapters, AnEngineSamplesWithTheNewAdaptersAndAgreesBitwise) {
  temp_dir d;
  const std::string how = GetParam();
  trainer_options o = options();
  o.optimizer.lr = 5e-2;
  policy_trainer t(adapted(), o);
  weights::local_versions local;
  local.add_trainer("trainer", t.model().shared_published());
  if (how == "colocated_copy") local.keep_copies(2);
  auto engine_model = adapted();
  serving::engine e(*engine_model, {64, 16, 256, 64});
  auto before = sample(e);
  weights::transport_options to;
  to.publisher = "lora_test_" + std::to_string(::getpid());
  to.dir = d.path;
  const auto kind = how == "ipc"          ? Transport::IPC
                    : how == "disk_delta" ? Transport::DISK_DELTA
                                          : Transport::COLOCATED;
  auto pub = weights::make_transport(kind, at::Device(at::kCPU), to);
  weights::receiver r;
  auto batch = before;
  for (uint64_t v = 1; v <= 2; ++v) {
    auto m = t.train(batch);
    EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"], 0.0) << how << ", version " << v - 1;
    auto ref = local.announce("trainer", v);
    weights::published_version pv;
    pv.version = v;
    pv.frozen = how == "colocated_copy";
    pv.weights = pv.frozen ? local.frozen("trainer", v) : local.live("trainer");
    weights::weights_update u;
    u.version = v;
    u.transport = pub->name();
    u.channel = "trainer";
    u.pid = ::getpid();
    pub->publish(pv, u);
    if (!u.share) u.hashes = weights::param_hashes(*pv.weights);
    // Adapters only: the update's tensors are the adapters'.
    EXPECT_EQ(pv.weights->buffer().numel(), t.model().adapters()->buffer().numel());
    r.apply(*engine_model, u, local);
    e.update_weights(v, serving::pause_mode::retract);
    EXPECT_TRUE(at::equal(engine_model->adapters()->buffer(), t.model().adapters()->buffer()))
        << how;
    EXPECT_TRUE(at::equal(engine_model->params().buffer(), t.model().params().buffer()));
    batch = sample(e);
  }
  bool changed = false;
  for (size_t i = 0; i < before.size() && i < batch.size(); ++i)
    changed = changed || before[i].rollout_logprobs != batch[i].rollout_logprobs;
  EXPECT_TRUE(changed) << how << ": the engine's log-probs did not change after two versions";
  auto m = t.train(batch);
  EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"], 0.0) << how;
}

INSTANTIATE_TEST_SUITE_P(Transports, PublishedAdapters,
                         ::testing::Values("colocated_share", "colocated_copy", "ipc",
                                           "disk_delta"));

}  // namespace
}  // namespace milesrt::trainer
