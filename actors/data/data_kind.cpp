#include "actors/data/data_kind.hpp"

#include <caf/all.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"
#include "milesrt/data.capnp.h"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::data {
using namespace milesrt::tasks;  // JSONL records
namespace {
using namespace milesrt::runtime;
using llm::prompt_msg;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct data_options {
  bool shuffle = true;
  uint32_t epochs = 1;  // 0: without end
  bool as_chat = false;
};

/// Where the source stands; this is all a checkpoint keeps.
struct position {
  uint64_t epoch = 0;
  uint64_t index = 0;  // next record of the epoch's order
  uint64_t order_seed = 0;
  uint64_t next_group_id = 1;
};

constexpr uint64_t state_magic = 0x314154414452534dULL;  // "MSRDATA1", the layout below

std::vector<uint8_t> encode(const position& p, uint64_t records) {
  const uint64_t words[] = {state_magic, p.epoch, p.index, p.order_seed, p.next_group_id, records};
  std::vector<uint8_t> out(sizeof words);
  std::memcpy(out.data(), words, sizeof words);
  return out;
}

bool decode(const std::vector<uint8_t>& bytes, uint64_t records, position& p) {
  uint64_t words[6];
  if (bytes.size() != sizeof words) return false;
  std::memcpy(words, bytes.data(), sizeof words);
  // A checkpoint of another dataset (another size) would silently serve other prompts.
  if (words[0] != state_magic || words[5] != records || words[2] > records) return false;
  p = {words[1], words[2], words[3], words[4]};
  return true;
}

/// The order of the records in one epoch: Fisher-Yates with our own index draws, so that the
/// order does not depend on the standard library's distributions.
std::vector<uint32_t> epoch_order(size_t n, bool shuffle, uint64_t order_seed, uint64_t epoch) {
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = uint32_t(i);
  if (!shuffle) return order;
  std::mt19937_64 rng(splitmix64(order_seed ^ splitmix64(epoch)));
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

struct data_state {
  std::shared_ptr<const std::vector<data_record>> records;
  data_options options;
  position pos;
  std::vector<uint32_t> order;  // of pos.epoch
  bool order_valid = false;
};

source_actor::behavior_type data_fn(source_actor::stateful_pointer<data_state> self,
                                    std::shared_ptr<const std::vector<data_record>> records,
                                    data_options options, uint64_t order_seed) {
  self->state.records = std::move(records);
  self->state.options = options;
  self->state.pos.order_seed = order_seed;
  return {
      [=](produce_atom, uint64_t count) {
        auto& st = self->state;
        const auto& recs = *st.records;
        node_reply reply;
        for (uint64_t i = 0; i < count && !recs.empty(); ++i) {
          if (st.pos.index >= recs.size()) {
            if (st.options.epochs != 0 && st.pos.epoch + 1 >= st.options.epochs) break;
            ++st.pos.epoch;
            st.pos.index = 0;
            st.order_valid = false;
          }
          if (st.options.epochs != 0 && st.pos.epoch >= st.options.epochs) break;
          if (!st.order_valid) {
            st.order =
                epoch_order(recs.size(), st.options.shuffle, st.pos.order_seed, st.pos.epoch);
            st.order_valid = true;
          }
          const data_record& r = recs[st.order[st.pos.index++]];
          prompt_msg p;
          p.group_id = st.pos.next_group_id++;
          p.label = r.label;
          p.ids = r.prompt_ids;
          p.text = r.prompt;
          p.response = r.response;
          p.messages_json = r.messages_json;
          if (st.options.as_chat && p.messages_json.empty()) {
            p.messages_json =
                nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}}).dump();
          }
          envelope e;
          e.payload = caf::make_message(std::move(p));
          reply.outputs.push_back({"prompts", std::move(e)});
        }
        reply.metrics["data_epoch"] = double(st.pos.epoch);
        return reply;
      },
      [=](snapshot_atom, const std::string&) {
        return actor_state{encode(self->state.pos, self->state.records->size())};
      },
      [=](restore_atom, const std::string&, const actor_state& s) {
        auto& st = self->state;
        if (!decode(s.bytes, st.records->size(), st.pos)) return false;
        st.order_valid = false;
        return true;
      },
  };
}

data_keys keys_of(schema::DataParams::Reader p) {
  data_keys k;
  k.prompt = p.getPromptKey();
  k.label = p.getLabelKey();
  k.messages = p.getMessagesKey();
  k.response = p.getResponseKey();
  k.prompt_ids = p.getPromptIdsKey();
  return k;
}

}  // namespace

void register_data_kind(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "data";
  k.summary = "serves the prompts of a JSONL dataset, shuffled per epoch";
  k.role = role::source;
  k.outputs = {{"prompts", llm::port_type::prompt, "one prompt per group, with its label"}};
  k.params_member = "data";
  k.check_params = [](capnp::DynamicStruct::Reader reader) {
    auto p = reader.as<schema::DataParams>();
    problem_list problems;
    const std::string path = p.getPath();
    std::error_code ec;
    if (path.empty()) {
      problems.push_back({"path", "required (a JSONL file)"});
    } else if (runtime::named_files_read() && !std::filesystem::is_regular_file(path, ec)) {
      problems.push_back({"path", "'" + path + "' is not a file"});
    }
    if (p.getPromptKey().size() == 0 && p.getMessagesKey().size() == 0 &&
        p.getPromptIdsKey().size() == 0) {
      problems.push_back({"promptKey", "required when messagesKey and promptIdsKey are empty"});
    }
    return problems;
  };
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::DataParams>();
    const std::string path = p.getPath();
    if (path.empty()) throw std::invalid_argument("params.data.path: a JSONL file is required");
    auto records = std::make_shared<const std::vector<data_record>>(load_jsonl(path, keys_of(p)));
    data_options o;
    o.shuffle = p.getShuffle();
    o.epochs = p.getEpochs();
    o.as_chat = p.getAsChat();
    const uint64_t order_seed = splitmix64(p.getSeed() ^ splitmix64(s.seed));
    return caf::actor_cast<caf::actor>(sys.spawn(data_fn, std::move(records), o, order_seed));
  };
  // A restarted source starts afresh; the driver asks it again for what the dead one owed.
  k.restartable = true;
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::data
