#include "runtime/metrics/metrics_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace milesrt::runtime {
namespace fs = std::filesystem;

namespace {

/// The counters as a JSON object, by name.
nlohmann::json to_json(const driver_counters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : c.named()) j[std::string(name)] = value;
  return j;
}

}  // namespace

nlohmann::json to_json(const step_record& r) {
  nlohmann::json j;
  j["step"] = r.step;
  j["version"] = r.version;
  j["seconds"] = r.seconds;
  j["busy_seconds"] = r.busy_seconds;
  j["active_seconds"] = r.active_seconds;
  j["idle_seconds"] = r.idle_seconds;
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [s, n] : r.staleness) hist[std::to_string(s)] = n;
  j["staleness"] = hist;
  j["counters"] = to_json(r.counters);
  j["metrics"] = r.metrics;
  if (!r.lists.empty()) j["lists"] = r.lists;
  // Which admitted items the step trained on: each exactly once over a run, resumes included.
  if (!r.batch_origins.empty()) j["origins"] = r.batch_origins;
  // With several sources mixed by weight: the batch's items per source.
  if (!r.batch_sources.empty()) j["sources"] = r.batch_sources;
  return j;
}

step_record step_record_from_json(const nlohmann::json& j) {
  step_record r;
  r.step = j.at("step").get<uint64_t>();
  r.version = j.value("version", uint64_t{0});
  r.seconds = j.value("seconds", 0.0);
  if (j.contains("busy_seconds"))
    r.busy_seconds = j["busy_seconds"].get<std::map<std::string, double>>();
  if (j.contains("active_seconds"))
    r.active_seconds = j["active_seconds"].get<std::map<std::string, double>>();
  r.idle_seconds = j.value("idle_seconds", 0.0);
  if (j.contains("staleness"))
    for (const auto& [s, n] : j["staleness"].items())
      r.staleness[std::stoull(s)] = n.get<uint64_t>();
  if (j.contains("counters"))
    for (const auto& [name, v] : j["counters"].items()) r.counters.set(name, v.get<uint64_t>());
  if (j.contains("metrics")) r.metrics = j["metrics"].get<metric_map>();
  if (j.contains("lists")) r.lists = j["lists"].get<metric_lists>();
  if (j.contains("origins")) r.batch_origins = j["origins"].get<std::vector<uint64_t>>();
  if (j.contains("sources")) r.batch_sources = j["sources"].get<std::map<std::string, uint64_t>>();
  return r;
}

void keep_steps_through(const fs::path& jsonl, uint64_t step) {
  std::ifstream in(jsonl);
  if (!in) return;  // nothing written yet
  std::string kept, line;
  std::set<uint64_t> steps;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut short (by a crash, a full disk) does not parse: dropped. It must belong to a step
    // after the checkpoint, which the resumed run records again; checked below.
    if (j.is_discarded() || !j.contains("step") || !j["step"].is_number_unsigned()) continue;
    if (j["step"].get<uint64_t>() > step) continue;
    if (!steps.insert(j["step"].get<uint64_t>()).second) continue;  // a step logged twice: once
    kept += line;
    kept += '\n';
  }
  in.close();
  // Every step up to the checkpoint must be there, or the resumed run would go on without it.
  if (steps.size() != step || (step > 0 && *steps.rbegin() != step)) {
    uint64_t missing = 1;
    while (steps.count(missing)) ++missing;
    throw std::runtime_error(jsonl.string() + " lacks step " + std::to_string(missing) +
                             " of the " + std::to_string(step) +
                             " the checkpoint holds (a line cut short or lost): "
                             "it cannot be resumed without losing that step's record");
  }
  fs::path tmp = jsonl;
  tmp += ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.flush();
    if (!out)
      throw std::runtime_error("cannot write " + tmp.string() +
                               (errno ? std::string(": ") + std::strerror(errno) : ""));
  }
  fs::rename(tmp, jsonl);
}

metrics_writer::metrics_writer(const fs::path& run_dir, std::string graph_name,
                               std::string progress_metric, uint64_t total_steps,
                               std::FILE* progress, bool append)
    : run_dir_(run_dir),
      graph_name_(std::move(graph_name)),
      progress_metric_(std::move(progress_metric)),
      total_steps_(total_steps),
      progress_(progress),
      tty_(progress != nullptr && isatty(fileno(progress))) {
  fs::create_directories(run_dir_);
  jsonl_.open(run_dir_ / "metrics.jsonl", append ? std::ios::app : std::ios::trunc);
  if (!jsonl_) throw std::runtime_error("cannot write " + (run_dir_ / "metrics.jsonl").string());
}

void metrics_writer::on_step(const step_record& r) {
  if (!unrecorded_) {
    errno = 0;
    jsonl_ << to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    jsonl_.flush();
    if (!jsonl_) unrecorded_ = r.step;
  }
  if (unrecorded_) {
    throw std::runtime_error("cannot write " + (run_dir_ / "metrics.jsonl").string() +
                             (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  }
  last_metrics_ = r.metrics;
  ++steps_seen_;
  if (progress_ == nullptr) return;
  const double elapsed = start_.seconds();
  double per_step = elapsed / double(steps_seen_);
  double eta = per_step * double(total_steps_ > r.step ? total_steps_ - r.step : 0);
  std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(total_steps_);
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %.2f s/step  ETA %.0f s", per_step, eta);
  line += buf;
  if (!progress_metric_.empty()) {
    auto it = r.metrics.find(progress_metric_);
    if (it != r.metrics.end()) {
      std::snprintf(buf, sizeof buf, "  %s=%.4g", progress_metric_.c_str(), it->second);
      line += buf;
    }
  }
  if (tty_) {
    std::fprintf(progress_, "\r\033[K%s", line.c_str());
  } else {
    std::fprintf(progress_, "%s\n", line.c_str());
  }
  std::fflush(progress_);
}

std::string metrics_writer::on_finish(const run_outcome& o) {
  if (tty_ && steps_seen_ > 0) std::fprintf(progress_, "\n");
  const double elapsed = start_.seconds();
  nlohmann::json s;
  s["graph"] = graph_name_;
  s["ok"] = o.ok;
  s["error"] = o.error;
  s["note"] = o.note;
  // Only the steps metrics.jsonl holds: none after one that could not be written.
  s["steps"] = unrecorded_ ? std::min(o.steps, unrecorded_ - 1) : o.steps;
  s["version"] = o.version;
  s["seconds"] = elapsed;
  s["counters"] = to_json(o.counters);
  s["last_metrics"] = last_metrics_;
  s["rejected"] = nlohmann::json::array();
  for (const auto& r : o.rejected)
    s["rejected"].push_back({{"actor", r.actor}, {"item", r.item}, {"reason", r.reason}});
  {
    const auto path = run_dir_ / "summary.json";
    errno = 0;
    std::ofstream out(path, std::ios::trunc);
    // The error may quote a remote server's bytes: invalid UTF-8 is replaced, not thrown.
    out << s.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out.flush();
    if (!out) {
      throw std::runtime_error("cannot write " + path.string() +
                               (errno ? std::string(": ") + std::strerror(errno) : std::string()));
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", elapsed);
  std::string line = graph_name_ + ": " + std::to_string(o.steps) + " steps in " + buf +
                     " s, version " + std::to_string(o.version);
  const auto& c = o.counters;
  for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"admitted", c.admitted},
                                    {"accepted", c.accepted},
                                    {"dropped_stale", c.dropped_stale},
                                    {"filtered", c.filtered},
                                    {"restarts", c.restarts},
                                    {"requeued", c.requeued},
                                    {"items_rejected", c.items_rejected}}) {
    if (value > 0) line += ", " + std::string(name) + " " + std::to_string(value);
  }
  if (c.buffered > 0) line += ", " + std::to_string(c.buffered) + " left unused in the buffer";
  if (!o.note.empty()) line += " (" + o.note + ")";
  return line;
}

}  // namespace milesrt::runtime
