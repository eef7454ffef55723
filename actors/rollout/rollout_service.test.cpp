// The rollout kind's generation service (its `generate` port, serving/generate_messages.hpp):
// called directly, as a session server or an environment would through a service edge.
#include <ATen/ATen.h>
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <filesystem>
#include <future>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/rollout/rollout_kind.hpp"
#include "milesrt/rollout.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::rollout {
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;
using serving::generate_atom;
using serving::generation_request;
using serving::generation_result;

class RolloutService : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-rollout-service-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto model =
        llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 128, "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "rope_theta": 10000.0, "tie_word_embeddings": true, "hidden_act": "silu"})",
                             at::kFloat, at::kCPU, 2);
    model->save(dir_ / "model");
    register_rollout_kind(kinds_);
    cfg_.add_message_types<caf::id_block::milesrt_runtime>();
    kinds_.register_types(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    capnp::MallocMessageBuilder params;
    auto p = params.initRoot<schema::RolloutParams>();
    p.setModel((dir_ / "model").string());
    p.setKvBlocks(64);
    actor_setup s;
    s.name = "rollout";
    s.store = std::make_shared<process_store>();
    s.params_struct = capnp::toDynamic(p.asReader());
    rollout_ = kinds_.find("rollout")->spawn(*sys_, s);
  }
  void TearDown() override {
    caf::anon_send_exit(rollout_, caf::exit_reason::user_shutdown);
    rollout_ = nullptr;  // the system waits for its detached thread, which waits for the handle
    sys_.reset();
    fs::remove_all(dir_);
  }

  /// The service's answer, or the error's text.
  generation_result call(const generation_request& r, std::string* error = nullptr,
                         caf::error* code = nullptr) {
    caf::scoped_actor self{*sys_};
    generation_result out;
    self->request(rollout_, std::chrono::seconds(60), generate_atom::value, r)
        .receive([&](generation_result& g) { out = std::move(g); },
                 [&](caf::error& e) {
                   if (error) *error = sys_->render(e);
                   if (code) *code = e;
                 });
    return out;
  }
  void publish(uint64_t version) {
    caf::scoped_actor self{*sys_};
    envelope e;
    e.payload = caf::make_message(version);
    e.min_version = e.max_version = version;
    self->request(rollout_, std::chrono::seconds(60), process_atom::value, std::string("weights"),
                  e)
        .receive([](const node_reply&) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  }

  fs::path dir_;
  kind_registry kinds_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::actor rollout_;
};

TEST_F(RolloutService, AnswersIdsWithLogProbsAndTheVersionOfEachToken) {
  generation_request r;
  r.input_ids = {5, 9, 17, 3, 64};
  r.max_tokens = 6;
  r.seed = 11;
  auto a = call(r);
  ASSERT_EQ(a.output_ids.size(), 6u);
  EXPECT_EQ(a.finish_reason, "length");
  ASSERT_EQ(a.logprobs.size(), 6u);
  ASSERT_EQ(a.versions, std::vector<uint64_t>(6, 0));
  for (float lp : a.logprobs) EXPECT_LT(lp, 0.0f);
  // The same request and seed sample the same ids; a version published since stamps the tokens.
  publish(3);
  auto b = call(r);
  EXPECT_EQ(b.output_ids, a.output_ids);
  EXPECT_EQ(b.logprobs, a.logprobs);
  EXPECT_EQ(b.versions, std::vector<uint64_t>(6, 3));
}

TEST_F(RolloutService, StopsAtTheCallersStopIds) {
  generation_request r;
  r.input_ids = {1, 2, 3};
  r.max_tokens = 8;
  r.seed = 4;
  auto a = call(r);
  ASSERT_FALSE(a.output_ids.empty());
  r.stop_token_ids = {a.output_ids[0]};
  auto b = call(r);
  EXPECT_EQ(b.output_ids, std::vector<int64_t>{a.output_ids[0]});
  EXPECT_EQ(b.finish_reason, "stop");
}

TEST_F(RolloutService, AStreamedRequestSendsItsTokensAsSampledBeforeItsResult) {
  generation_request r;
  r.input_ids = {5, 9, 17, 3, 64};
  r.max_tokens = 7;
  r.seed = 11;
  const auto whole = call(r);
  ASSERT_EQ(whole.output_ids.size(), 7u);
  // A requester that logs what reaches it, in arrival order: partials, then the result.
  struct log {
    std::vector<serving::generation_partial> partials;
    generation_result result;
    size_t partials_before_result = 0;
    bool done = false;
  };
  auto seen = std::make_shared<log>();
  std::promise<void> finished;
  auto done = finished.get_future();
  r.stream_id = 42;
  sys_->spawn([&, seen, r](caf::event_based_actor* self) -> caf::behavior {
    self->request(rollout_, std::chrono::seconds(60), generate_atom::value, r)
        .then(
            [&, seen, self](generation_result& g) {
              seen->result = std::move(g);
              seen->partials_before_result = seen->partials.size();
              seen->done = true;
              finished.set_value();
              self->quit();
            },
            [&, self](caf::error&) {
              finished.set_value();
              self->quit();
            });
    return {[seen](generate_atom, serving::generation_partial& p) {
      seen->partials.push_back(std::move(p));
    }};
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  ASSERT_TRUE(seen->done);
  // One partial per decode step, every token once, in order, all before the result; the same
  // tokens as unstreamed (the stream id changes nothing sampled).
  EXPECT_GE(seen->partials_before_result, 2u);
  generation_result joined;
  for (const auto& p : seen->partials) {
    EXPECT_EQ(p.stream_id, 42u);
    joined.output_ids.insert(joined.output_ids.end(), p.output_ids.begin(), p.output_ids.end());
    joined.logprobs.insert(joined.logprobs.end(), p.logprobs.begin(), p.logprobs.end());
    joined.versions.insert(joined.versions.end(), p.versions.begin(), p.versions.end());
  }
  EXPECT_EQ(seen->partials_before_result, seen->partials.size());
  // The last step's token comes with the result only (it finished the sample in that step).
  ASSERT_LE(joined.output_ids.size(), whole.output_ids.size());
  EXPECT_GE(joined.output_ids.size() + 1, whole.output_ids.size());
  EXPECT_TRUE(
      std::equal(joined.output_ids.begin(), joined.output_ids.end(), whole.output_ids.begin()));
  EXPECT_TRUE(std::equal(joined.logprobs.begin(), joined.logprobs.end(), whole.logprobs.begin()));
  EXPECT_EQ(seen->result.output_ids, whole.output_ids);
}

TEST_F(RolloutService, ABadRequestIsAnErrorNamingTheField) {
  std::string error;
  generation_request r;
  call(r, &error);
  EXPECT_NE(error.find("empty prompt"), std::string::npos) << error;
  r.input_ids = {1, 2};
  r.temperature = 0;
  error.clear();
  call(r, &error);
  EXPECT_NE(error.find("temperature"), std::string::npos) << error;
  r.temperature = 1;
  r.input_ids = {1, 500};
  error.clear();
  call(r, &error);
  EXPECT_NE(error.find("token id 500"), std::string::npos) << error;
  // A request that can never fit the KV cache (64 blocks of 16) is the caller's to fix: its
  // error says so by its class, bad input (the session server answers it 400, not 503).
  r.input_ids.assign(64 * 16, 3);
  caf::error code;
  error.clear();
  call(r, &error, &code);
  EXPECT_NE(error.find("KV blocks"), std::string::npos) << error;
  EXPECT_EQ(runtime::class_of(code), errc::bad_input) << error;
  // The service still answers.
  r.input_ids = {1, 2};
  r.max_tokens = 2;
  EXPECT_EQ(call(r).output_ids.size(), 2u);
}

}  // namespace
}  // namespace milesrt::rollout
