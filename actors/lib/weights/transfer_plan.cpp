#include "actors/lib/weights/transfer_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace milesrt::weights {
namespace {

std::string range_text(const shard& s) {
  return "tensor '" + s.tensor + "' elements [" + std::to_string(s.offset) + ", " +
         std::to_string(s.offset + s.length) + ")";
}

void check_range(const shard& s, const char* who) {
  if (s.offset < 0 || s.length <= 0)
    throw std::invalid_argument(std::string("plan_p2p: empty or negative range ") + who + ": " +
                                range_text(s) + " of rank " + std::to_string(s.rank));
}

}  // namespace

std::vector<transfer> plan_p2p(const std::vector<shard>& owned_by_trainers,
                               const std::vector<shard>& needed_by_engines) {
  std::map<std::string, std::vector<const shard*>> owners;
  std::set<int> ranks;
  for (const auto& s : owned_by_trainers) {
    check_range(s, "owned");
    owners[s.tensor].push_back(&s);
    ranks.insert(s.rank);
  }
  const std::vector<int> trainer_ranks(ranks.begin(), ranks.end());
  const auto count = static_cast<int64_t>(trainer_ranks.size());

  std::vector<transfer> out;
  const shard* last_src = nullptr;  // the owned range out.back() comes from
  for (const auto& need : needed_by_engines) {
    check_range(need, "needed");
    const int64_t a = need.offset, b = need.offset + need.length;
    auto it = owners.find(need.tensor);
    if (it == owners.end())
      throw std::invalid_argument("plan_p2p: " + range_text(need) + " needed by engine rank " +
                                  std::to_string(need.rank) + " is owned by no trainer");
    // Owner boundaries split [a, b) into pieces that each owner covers wholly or not at all.
    std::set<int64_t> cuts{a, b};
    for (const shard* o : it->second) {
      if (o->offset > a && o->offset < b) cuts.insert(o->offset);
      if (o->offset + o->length > a && o->offset + o->length < b)
        cuts.insert(o->offset + o->length);
    }
    // Preferred trainer: position dst_rank mod count among the trainer ranks; others by how far
    // after it they come (cyclically).
    const int64_t pref = ((need.rank % count) + count) % count;
    auto distance = [&](int rank) {
      int64_t pos = std::lower_bound(trainer_ranks.begin(), trainer_ranks.end(), rank) -
                    trainer_ranks.begin();
      return (pos - pref + count) % count;
    };
    for (auto c = cuts.begin(); std::next(c) != cuts.end(); ++c) {
      const int64_t x = *c, y = *std::next(c);
      const shard* best = nullptr;
      for (const shard* o : it->second) {
        if (o->offset > x || o->offset + o->length < y) continue;
        if (!best || distance(o->rank) < distance(best->rank) ||
            (o->rank == best->rank && o->offset < best->offset))
          best = o;
      }
      if (!best)
        throw std::invalid_argument("plan_p2p: " + range_text({need.tensor, need.rank, x, y - x}) +
                                    " needed by engine rank " + std::to_string(need.rank) +
                                    " is owned by no trainer");
      // Continue the previous transfer when the same owned range goes on.
      if (c != cuts.begin() && last_src == best) {
        out.back().length += y - x;
        continue;
      }
      last_src = best;
      out.push_back({best->rank, need.rank, need.tensor, x - best->offset, x - a, y - x});
    }
  }
  return out;
}

std::vector<bucket> make_buckets(const std::vector<std::pair<std::string, int64_t>>& tensors,
                                 int64_t bucket_bytes) {
  if (bucket_bytes <= 0)
    throw std::invalid_argument("make_buckets: bucket size " + std::to_string(bucket_bytes));
  std::vector<bucket> out;
  for (const auto& [name, bytes] : tensors) {
    if (bytes < 0)
      throw std::invalid_argument("make_buckets: tensor '" + name + "' has " +
                                  std::to_string(bytes) + " bytes");
    if (out.empty() || out.back().bytes + bytes > bucket_bytes) {
      if (out.empty() || !out.back().tensors.empty()) out.emplace_back();
    }
    out.back().tensors.emplace_back(name, bytes);
    out.back().bytes += bytes;
  }
  return out;
}

std::vector<transfer> plan_whole_model(const std::vector<std::pair<std::string, int64_t>>& tensors,
                                       int engines) {
  std::vector<shard> owned, needed;
  for (const auto& [name, n] : tensors) {
    owned.push_back({name, 0, 0, n});
    for (int e = 1; e <= engines; ++e) needed.push_back({name, e, 0, n});
  }
  return plan_p2p(owned, needed);
}

}  // namespace milesrt::weights
