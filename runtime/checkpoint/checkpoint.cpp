#include "runtime/checkpoint/checkpoint.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace milesrt::runtime {
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& data) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.flush();
  if (!out) {
    // errno says why (a full disk, a file-size limit, a read-only folder) where the stream set it.
    throw std::runtime_error("cannot write " + path.string() +
                             (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
}

/// Lists every regular file under `root` with its size, relative paths as keys.
nlohmann::json file_list(const fs::path& root) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    auto rel = fs::relative(entry.path(), root).string();
    if (rel == "manifest.json") continue;
    files[rel] = entry.file_size();
  }
  return files;
}

/// The manifest's fields when `dir` is complete; nullopt (with the reason in `why`) otherwise.
std::optional<nlohmann::json> read_manifest(const fs::path& dir, std::string& why) {
  std::ifstream in(dir / "manifest.json");
  if (!in) {
    why = "no manifest.json";
    return std::nullopt;
  }
  nlohmann::json m;
  try {
    in >> m;
  } catch (const std::exception& e) {
    why = std::string("manifest.json is not valid JSON: ") + e.what();
    return std::nullopt;
  }
  if (!m.contains("files") || !m["files"].is_object()) {
    why = "manifest.json lists no files";
    return std::nullopt;
  }
  for (const auto& [name, size] : m["files"].items()) {
    std::error_code ec;
    auto actual = fs::file_size(dir / name, ec);
    if (ec) {
      why = "file " + name + " is missing";
      return std::nullopt;
    }
    if (actual != size.get<uint64_t>()) {
      why = "file " + name + " has " + std::to_string(actual) + " bytes, the manifest says " +
            std::to_string(size.get<uint64_t>());
      return std::nullopt;
    }
  }
  return m;
}

}  // namespace

checkpoint_writer::checkpoint_writer(const fs::path& run_dir, uint64_t step) {
  final_ = run_dir / "checkpoints" / ("step-" + std::to_string(step));
  tmp_ = final_;
  tmp_ += ".tmp";
  fs::remove_all(tmp_);
  fs::create_directories(tmp_);
}

fs::path checkpoint_writer::actor_dir(const std::string& key) const {
  fs::path d = tmp_ / "actors" / key;
  fs::create_directories(d);
  return d;
}

void checkpoint_writer::put_bytes(const std::string& name, const std::vector<uint8_t>& bytes) {
  write_file(tmp_ / name, std::string(bytes.begin(), bytes.end()));
}

fs::path checkpoint_writer::commit(const std::map<std::string, std::string>& fields) {
  nlohmann::json m;
  for (const auto& [k, v] : fields) m[k] = v;
  m["files"] = file_list(tmp_);
  fs::remove_all(final_);
  fs::rename(tmp_, final_);
  // Written last: a crash before this line leaves a folder that resume skips.
  write_file(final_ / "manifest.json.tmp",
             m.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  fs::rename(final_ / "manifest.json.tmp", final_ / "manifest.json");
  return final_;
}

checkpoint_reader::checkpoint_reader(const fs::path& dir) : dir_(dir) {
  std::string why;
  auto m = read_manifest(dir, why);
  if (!m) throw std::runtime_error("checkpoint " + dir.string() + " is incomplete: " + why);
  for (const auto& [k, v] : m->items())
    if (v.is_string()) fields_[k] = v.get<std::string>();
}

std::vector<uint8_t> checkpoint_reader::get_bytes(const std::string& name) const {
  std::ifstream in(dir_ / name, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint " + dir_.string() + " has no file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path checkpoint_reader::actor_dir(const std::string& key) const {
  return dir_ / "actors" / key;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  std::optional<fs::path> best;
  uint64_t best_step = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    auto name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step-", 0) != 0) continue;
    auto digits = name.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    uint64_t step = std::stoull(digits);
    std::string why;
    if (!read_manifest(entry.path(), why)) continue;
    if (!best || step > best_step) {
      best = entry.path();
      best_step = step;
    }
  }
  return best;
}

}  // namespace milesrt::runtime
