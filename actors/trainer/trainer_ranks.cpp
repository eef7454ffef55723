#include "actors/trainer/trainer_ranks.hpp"

#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/device.hpp"
#include "runtime/core/log.hpp"

namespace milesrt::trainer {

void check_agreement(trainer_state& st, uint64_t step, std::map<std::string, double>& m) {
  const auto it = m.find("train_rollout_logprob_abs_diff_max_held");
  if (it == m.end()) return;  // no sequence of the held version in this batch (or SFT)
  const double diff = it->second;
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.3g", diff);
  if (st.true_on_policy) {
    if (diff != 0)
      throw std::runtime_error(
          std::string("trueOnPolicy: the trainer's log-probs of the tokens sampled under the "
                      "weights it holds (version ") +
          std::to_string(st.version) + ") differ from the engine's by up to " + shown +
          " (must be 0)");
    return;
  }
  if (st.logprob_alarm <= 0) return;
  const bool alarm = diff > st.logprob_alarm;
  m["logprob_diff_alarm"] = alarm ? 1.0 : 0.0;
  if (alarm) {
    ++st.alarms;
    log::warn(log::at{st.name, step},
              "the trainer's log-probs of tokens sampled under the weights it holds differ from "
              "the engine's by up to {}, above logprobDiffAlarm ({})",
              shown, st.logprob_alarm);
  }
  m["logprob_diff_alarms"] = static_cast<double>(st.alarms);
}

void read_rank_fault(trainer_state& st) {
  const char* v = std::getenv("MILESRT_TEST_RANK_DIES");
  if (!v) return;
  int rank = 0;
  unsigned long long step = 0;
  char end = 0;
  if (std::sscanf(v, "%d:%llu%c", &rank, &step, &end) != 2 || rank < 1 || step == 0)
    throw std::invalid_argument(std::string("MILESRT_TEST_RANK_DIES: expected RANK:STEP (rank "
                                            "from 1, step from 1), got '") +
                                v + "'");
  st.fault_rank = rank;
  st.fault_step = step;
}

std::unique_ptr<rank_pool> start_ranks(schema::TrainerParams::Reader p, const trainer_options& o,
                                       std::shared_ptr<const rl::registries> losses) {
  dist::group_options g;
  g.host = p.getStoreHost();
  g.port = p.getStorePort() != 0 ? p.getStorePort() : dist::pick_free_port(g.host);
  g.world_size = static_cast<int>(p.getDataParallel());
  g.join_timeout = g.op_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(p.getRankTimeoutSeconds() * 1000));
  const std::string path = p.getModel();
  const auto dtype = llm::to_dtype(p.getDtype());
  const auto device = llm::to_device(p.getDevice());
  auto make = [o, path, dtype, device, losses](int rank, dist::collectives& group) {
    auto mine = o;
    mine.group = &group;
    return std::make_unique<policy_trainer>(
        llm::decoder::load(path, dtype, rank_pool::device_of(device, rank)), mine, *losses);
  };
  try {
    return std::make_unique<rank_pool>(g, make, device);
  } catch (const std::exception& e) {
    throw std::runtime_error("params.trainer.dataParallel: the " + std::to_string(g.world_size) +
                             " ranks did not form a group: " + e.what());
  }
}

void on_every_rank(trainer_state& st, const std::function<void(policy_trainer&)>& job,
                   const std::function<void()>& own) {
  if (!st.ranks) return own();
  at::set_num_threads(1);
  st.ranks->run(job, own);
}

}  // namespace milesrt::trainer
