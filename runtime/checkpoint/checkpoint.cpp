#include "runtime/checkpoint/checkpoint.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace milesrt::runtime {
namespace fs = std::filesystem;

namespace {

using hash_state = std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)>;

hash_state new_hash() {
  hash_state st(XXH3_createState(), &XXH3_freeState);
  if (!st || XXH3_64bits_reset(st.get()) != XXH_OK)
    throw std::runtime_error("checkpoint: cannot start a content hash (XXH3)");
  return st;
}

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

/// The XXH3-64 of a file's content, read in 1 MiB pieces; nullopt when it cannot be read.
std::optional<uint64_t> file_hash(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  auto st = new_hash();
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) XXH3_64bits_update(st.get(), buf.data(), size_t(in.gcount()));
  }
  if (!in.eof()) return std::nullopt;
  return XXH3_64bits_digest(st.get());
}

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

/// Every regular file under `root` but the manifest, as paths relative to it.
std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    auto rel = fs::relative(entry.path(), root).generic_string();
    if (rel != "manifest.json") out.insert(rel);
  }
  return out;
}

/// A manifest's file name stays inside its folder: relative, no `..`.
bool inside(const std::string& name) {
  fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
}

/// Checks one manifest entry against the file; sets `sizes_only` for an entry of the old form (a
/// byte count alone). Returns the problem, or "".
std::string check_file(const fs::path& dir, const std::string& name, const nlohmann::json& entry,
                       bool& sizes_only) {
  const std::string where = "manifest.json: files.\"" + name + "\"";
  if (!inside(name)) return where + ": a path outside the checkpoint folder";
  const nlohmann::json* bytes = &entry;
  const nlohmann::json* hash = nullptr;
  if (entry.is_object()) {
    auto b = entry.find("bytes");
    auto h = entry.find("xxh3");
    if (b == entry.end() || h == entry.end() || !h->is_string() ||
        h->get<std::string>().size() != 16)
      return where + ": expected {\"bytes\": N, \"xxh3\": 16 hex digits}";
    bytes = &*b;
    hash = &*h;
  } else {
    sizes_only = true;
  }
  if (!bytes->is_number_unsigned())
    return where + (entry.is_object() ? ".bytes" : "") + ": expected a byte count, got " +
           bytes->type_name() + " " + bytes->dump();
  const uint64_t want = bytes->get<uint64_t>();
  std::error_code ec;
  const auto actual = fs::file_size(dir / name, ec);
  if (ec) return "file " + name + " is missing";
  if (actual != want)
    return "file " + name + " has " + std::to_string(actual) + " bytes, the manifest says " +
           std::to_string(want);
  if (!hash) return "";
  auto got = file_hash(dir / name);
  if (!got) return "file " + name + " cannot be read";
  if (hex(*got) != hash->get<std::string>())
    return "file " + name + " has content hash " + hex(*got) + ", the manifest says " +
           hash->get<std::string>() + " (its content changed after it was written)";
  return "";
}

/// The manifest when `dir` verifies (its problem in `check` otherwise).
std::optional<nlohmann::json> read_manifest(const fs::path& dir, std::optional<uint64_t> step,
                                            checkpoint_check& check) {
  std::ifstream in(dir / "manifest.json");
  if (!in) {
    check.problem = "no manifest.json (its writing was cut off)";
    check.unfinished = true;
    return std::nullopt;
  }
  nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) {
    check.problem = "manifest.json is not a JSON object";
    return std::nullopt;
  }
  if (!m.contains("files") || !m["files"].is_object()) {
    check.problem = "manifest.json lists no files";
    return std::nullopt;
  }
  if (step && m.contains("step") && m["step"] != nlohmann::json(std::to_string(*step))) {
    check.problem =
        "manifest.json: step is " + m["step"].dump() + ", the folder's is " + std::to_string(*step);
    return std::nullopt;
  }
  bool hashed = false;
  for (const auto& [name, entry] : m["files"].items()) {
    check.problem = check_file(dir, name, entry, check.sizes_only);
    if (!check.ok()) return std::nullopt;
    hashed = hashed || entry.is_object();
  }
  if (hashed && check.sizes_only) {
    check.problem = "manifest.json: some files have content hashes and some do not";
    return std::nullopt;
  }
  // Files added after the commit would not be checked; with hashes, the manifest lists them all.
  if (hashed) {
    for (const auto& f : files_under(dir)) {
      if (!m["files"].contains(f)) {
        check.problem = "file " + f + " is not in manifest.json";
        return std::nullopt;
      }
    }
  }
  return m;
}

/// The step of a folder named exactly `step-N` (N without leading zeros, fitting 64 bits).
std::optional<uint64_t> step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string digits = name.substr(5);
  if (digits.empty() || digits.size() > 20 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (std::to_string(v) != digits) return std::nullopt;  // leading zeros: not a name we write
  return v;
}

}  // namespace

checkpoint_check check_checkpoint(const fs::path& dir, std::optional<uint64_t> step) {
  checkpoint_check check;
  try {
    read_manifest(dir, step, check);
  } catch (const std::exception& e) {  // a folder that cannot be listed, say
    check.problem = e.what();
  }
  return check;
}

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
  hashed_[fs::path(name).generic_string()] = XXH3_64bits(bytes.data(), bytes.size());
}

fs::path checkpoint_writer::commit(const std::map<std::string, std::string>& fields) {
  nlohmann::json m;
  for (const auto& [k, v] : fields) m[k] = v;
  nlohmann::json files = nlohmann::json::object();
  for (const auto& rel : files_under(tmp_)) {
    const fs::path path = tmp_ / rel;
    std::optional<uint64_t> h;
    if (auto it = hashed_.find(rel); it != hashed_.end()) {
      h = it->second;
    } else {
      h = file_hash(path);
    }
    if (!h) throw std::runtime_error("cannot read " + path.string() + " back to hash it");
    files[rel] = {{"bytes", fs::file_size(path)}, {"xxh3", hex(*h)}};
  }
  m["files"] = std::move(files);
  fs::remove_all(final_);
  fs::rename(tmp_, final_);
  // Written last: a crash before this line leaves a folder that resume skips.
  write_file(final_ / "manifest.json.tmp",
             m.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  fs::rename(final_ / "manifest.json.tmp", final_ / "manifest.json");
  return final_;
}

checkpoint_reader::checkpoint_reader(const fs::path& dir) : dir_(dir) {
  checkpoint_check check;
  std::optional<nlohmann::json> m;
  try {
    m = read_manifest(dir, step_of(dir.filename().string()), check);
  } catch (const std::exception& e) {
    check.problem = e.what();
  }
  if (!m)
    throw std::runtime_error("checkpoint " + dir.string() + " does not verify: " + check.problem);
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

checkpoint_search find_checkpoint(const fs::path& run_dir) {
  checkpoint_search out;
  const fs::path root = run_dir / "checkpoints";
  std::vector<std::pair<uint64_t, fs::path>> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const auto name = entry.path().filename().string();
    std::error_code dir_ec;
    const bool is_dir = entry.is_directory(dir_ec);
    auto step = is_dir ? step_of(name) : std::nullopt;
    if (step) {
      steps.emplace_back(*step, entry.path());
    } else if (is_dir && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
               step_of(name.substr(0, name.size() - 4))) {
      continue;  // a checkpoint being written, or one whose writing was cut off
    } else {
      out.warnings.push_back("ignored " + entry.path().string() +
                             ": not a checkpoint (checkpoints are folders named step-N, N a step "
                             "number of at most 20 digits without leading zeros)");
    }
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a > b; });
  for (const auto& [step, path] : steps) {
    auto check = check_checkpoint(path, step);
    if (check.ok()) {
      out.newest = path;
      out.step = step;
      if (check.sizes_only)
        out.warnings.push_back("checkpoint " + path.string() +
                               " has no content hashes (written by an older milesrt): only its "
                               "files' sizes were checked");
      break;
    }
    std::string line = "skipped checkpoint " + path.string() + ": " + check.problem;
    if (!check.unfinished && !out.newer_corrupt) out.newer_corrupt = line;
    out.warnings.push_back(std::move(line));
  }
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  return find_checkpoint(run_dir).newest;
}

}  // namespace milesrt::runtime
