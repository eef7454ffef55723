#include "actors/session_server/session_server_kind.hpp"

#include <caf/all.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/agent/openai_api.hpp"
#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/session_server/session_server.hpp"
#include "milesrt/session_server.capnp.h"
#include "runtime/core/log.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::session_server {
namespace {
using namespace milesrt::runtime;
namespace fs = std::filesystem;

bool loopback(const std::string& address) {
  return address == "127.0.0.1" || address == "::1" || address.rfind("127.", 0) == 0;
}

problem_list check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::SessionServerParams>();
  problem_list problems;
  for (auto& e : llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::tokenizer))
    problems.push_back(e);
  if (!loopback(p.getAddress()) && p.getBearerToken().size() == 0) {
    problems.push_back(
        {"address", "'" + std::string(p.getAddress()) +
                        "' is not loopback: set bearerToken so that every request must carry it"});
  }
  for (auto [field, v] : {std::pair{"idleTimeoutSeconds", p.getIdleTimeoutSeconds()},
                          std::pair{"groupTimeoutSeconds", p.getGroupTimeoutSeconds()}}) {
    if (!(v > 0) || !std::isfinite(v) || v > 1e7)
      problems.push_back({field, "must be > 0 and at most 1e7 seconds"});
  }
  if (!(p.getRetryAfterSeconds() >= 0) || p.getRetryAfterSeconds() > 1e7)
    problems.push_back({"retryAfterSeconds", "must be >= 0 and at most 1e7 seconds"});
  if (p.getMaxOpenSessions() == 0) problems.push_back({"maxOpenSessions", "must be at least 1"});
  if (p.getMaxNewTokens() == 0) problems.push_back({"maxNewTokens", "must be at least 1"});
  if (p.getBodyLimit() < 1024) problems.push_back({"bodyLimit", "must be at least 1024 bytes"});
  if (!(p.getTemperature() > 0) || !std::isfinite(p.getTemperature()))
    problems.push_back({"temperature", "must be > 0 (the trainer's sampling temperature)"});
  return problems;
}

/// The model's vocabulary from its config.json (0 when it cannot be read: the engine then refuses
/// an id past it as the turn starts, and the turn is taken back). It bounds the ids a harness may
/// send, before they enter a session.
int64_t vocab_size(const fs::path& model) {
  std::error_code ec;
  const auto config = model / "config.json";
  if (!fs::is_regular_file(config, ec) || fs::file_size(config, ec) > (16u << 20)) return 0;
  std::ifstream in(config, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!runtime::json_nesting_problem(text).empty()) return 0;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  for (const auto* c : {&j, j.is_object() && j.contains("text_config") ? &j["text_config"] : &j})
    if (c->is_object() && c->contains("vocab_size") && (*c)["vocab_size"].is_number_unsigned())
      return (*c)["vocab_size"].get<int64_t>();
  return 0;
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

/// The HTTP server, bound now (so that a port in use fails the actor's start), JSON errors.
std::shared_ptr<http_server> bind_server(schema::SessionServerParams::Reader p) {
  http_server_options o;
  o.address = p.getAddress();
  o.port = p.getPort();
  o.bearer_secret = p.getBearerToken();
  o.body_limit = p.getBodyLimit();
  o.error_page = [](unsigned status, const std::string& message) {
    return http_response(
        status, "application/json",
        agent::error_body(status, message)
            .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  };
  return std::make_shared<http_server>(std::move(o));
}

caf::actor spawn(caf::actor_system& sys, const actor_setup& s) {
  auto p = s.params_struct->as<schema::SessionServerParams>();
  server_config cfg;
  auto tok = llm::tokenizer::load(std::string(p.getModel()));
  if (!tok.tok) throw std::invalid_argument("params.sessionServer.model: " + tok.error);
  auto tmpl = llm::chat_template::load(std::string(p.getChatTemplate()), *tok.tok);
  if (!tmpl.tmpl) {
    throw std::invalid_argument(
        "params.sessionServer.chatTemplate: " +
        (tmpl.error.empty() ? "the model has no chat template" : tmpl.error));
  }
  cfg.tok = tok.tok;
  cfg.tmpl = tmpl.tmpl;
  cfg.limits.max_open = p.getMaxOpenSessions();
  cfg.limits.idle_timeout = millis(p.getIdleTimeoutSeconds());
  cfg.limits.group_timeout = millis(p.getGroupTimeoutSeconds());
  cfg.limits.partial_groups = p.getPartialGroups();
  cfg.limits.max_tokens = p.getMaxTokens();
  cfg.model_name = p.getModelName();
  cfg.max_new_tokens = p.getMaxNewTokens();
  cfg.temperature = p.getTemperature();
  cfg.limits.vocab_size = vocab_size(std::string(p.getModel()));
  cfg.retry_after_seconds =
      static_cast<uint32_t>(std::max(1.0, std::ceil(p.getRetryAfterSeconds())));
  cfg.seed = s.seed * 7919 + 17;
  cfg.score_unrewarded = p.getScoreUnrewarded();
  auto http = bind_server(p);
  std::string host = http->address();
  if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  cfg.url = "http://" + host + ":" + std::to_string(http->port());
  // Where clients (and tests) find the server when its port was left to the system: written
  // whole under another name, then renamed, so a reader never sees it half written.
  std::error_code ec;
  fs::create_directories(s.run_dir, ec);
  const auto where = s.run_dir / (s.name + ".json"), part = s.run_dir / (s.name + ".json.part");
  std::ofstream(part) << nlohmann::json{{"url", cfg.url}, {"port", http->port()}}.dump() << "\n";
  fs::rename(part, where, ec);
  log::info(log::at{s.name, {}}, "sessions at {}", cfg.url);
  return spawn_session_server(sys, std::move(cfg), std::move(http));
}

/// scoreUnrewarded sends groups out on `unscored`: without an edge from it they would be lost.
problem_list check_edges(capnp::DynamicStruct::Reader r, const runtime::actor_in_graph& g) {
  if (!r.as<schema::SessionServerParams>().getScoreUnrewarded()) return {};
  for (const auto& n : g.downstream)
    if (n.port == "unscored") return {};
  return {{"scoreUnrewarded",
           "groups with a session ended without a reward go out on port 'unscored', which has no "
           "edge (join it to a reward actor: (from = \"" +
               g.name + ".unscored\", to = \"reward.groups\"))"}};
}

}  // namespace

void register_session_server_kind(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "session_server";
  k.summary = "serves agent sessions over HTTP (OpenAI chat completions); ended groups are items";
  k.role = role::source;
  k.outputs = {{"groups", llm::port_type::scored_group,
                "the sessions of one group, ended, with their rewards and sampled-token masks"},
               {"unscored", llm::port_type::sample_group,
                "scoreUnrewarded: a group with a session ended without a reward, for a reward "
                "actor (label: the sessions' metadata.label; text: each one's last turn)"}};
  k.uses = {{"generate", serving::service_type::generate, "a rollout's generation service"}};
  k.params_member = "sessionServer";
  k.check_params = check;
  k.check_in_graph = check_edges;
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    return {{"temperature", "temperature",
             llm::temperature_agreement(r.as<schema::SessionServerParams>().getTemperature())}};
  };
  k.spawn = spawn;
  registry.add(k);
  // The groups it emits are the LLM layers' sample groups (the rollout adds the same block).
  registry.add_types([](caf::actor_system_config& cfg) {
    cfg.add_message_types<caf::id_block::milesrt_llm>();
    cfg.add_message_types<caf::id_block::milesrt_serving>();
  });
}

}  // namespace milesrt::session_server
