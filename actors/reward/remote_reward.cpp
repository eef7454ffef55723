#include "actors/reward/remote_reward.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "runtime/core/failure.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_client.hpp"

namespace milesrt::reward {

std::string reward_request_body(const llm::sample_group& group) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : group.samples) {
    samples.push_back({{"prompt_ids", s.prompt}, {"output_ids", s.output}, {"text", s.text}});
  }
  nlohmann::json body = {
      {"group_id", group.group_id}, {"label", group.label}, {"samples", std::move(samples)}};
  // Completions may cut a UTF-8 sequence in half: replace, do not throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<float> parse_reward_answer(const std::string& body, size_t count) {
  // The server's bytes reach error messages (and so metrics and live JSON files) only as a
  // repaired excerpt; an answer that is not UTF-8 or nests too deep is refused before parsing.
  auto snippet = [&] { return runtime::excerpt(body, 80); };
  if (!runtime::valid_utf8(body))
    throw std::invalid_argument("the answer is not valid UTF-8: '" + snippet() + "'");
  if (auto deep = runtime::json_nesting_problem(body); !deep.empty())
    throw std::invalid_argument("the answer is " + deep);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // A parse error, or a number past a double (out_of_range 406: 1e400).
    const bool overflow = dynamic_cast<const nlohmann::json::out_of_range*>(&e) != nullptr;
    throw std::invalid_argument(
        std::string(overflow ? "the answer holds a number that overflows a double"
                             : "the answer is not JSON") +
        ": '" + snippet() + "'");
  }
  if (!j.is_object() || !j.contains("rewards") || !j["rewards"].is_array()) {
    throw std::invalid_argument("the answer has no \"rewards\" array: '" + snippet() + "'");
  }
  const auto& rewards = j["rewards"];
  if (rewards.size() != count) {
    throw std::invalid_argument("the answer has " + std::to_string(rewards.size()) +
                                " rewards for " + std::to_string(count) + " samples");
  }
  std::vector<float> out;
  for (size_t i = 0; i < rewards.size(); ++i) {
    if (!rewards[i].is_number()) {
      throw std::invalid_argument("rewards[" + std::to_string(i) + "] is " +
                                  rewards[i].type_name() + ", not a number");
    }
    const float r = rewards[i].get<float>();
    if (!std::isfinite(r)) {  // 1e300 is a JSON number, but no float
      throw std::invalid_argument("rewards[" + std::to_string(i) + "] is " + rewards[i].dump() +
                                  ", not a finite float");
    }
    out.push_back(r);
  }
  return out;
}

std::vector<float> fetch_rewards(const remote_reward_config& config,
                                 const llm::sample_group& group) {
  const std::string where = "POST " + config.url + ": ";
  const auto url =
      in_context("POST " + config.url, [&] { return runtime::parse_http_url(config.url); });
  const std::string body = reward_request_body(group);
  // Unreachable or 5xx on every attempt: transient (the driver restarts the actor, which asks
  // again, within the run's restart limits).
  const auto res = runtime::http_post_retrying(
      url, body, {config.retries, config.backoff_seconds, config.timeout_seconds},
      "POST " + config.url);
  const std::string status = "HTTP " + std::to_string(res.status) +
                             (res.body.empty() ? "" : ": " + runtime::excerpt(res.body));
  // The server refused this group (a 400, 413 or 422): bad input, the group is dropped; any
  // other refusal (404, 401, ...) is the graph's or the server's fault and ends the run.
  if (res.status == 400 || res.status == 413 || res.status == 422)
    fail(errc::bad_input, where + status);
  if (res.status != 200) throw std::runtime_error(where + status);
  try {
    return parse_reward_answer(res.body, group.samples.size());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(where + e.what());
  }
}

}  // namespace milesrt::reward
