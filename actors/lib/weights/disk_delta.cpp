#include "actors/lib/weights/disk_delta.hpp"

#include <ATen/ATen.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <caf/all.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "actors/lib/weights/tensor_hash.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::weights {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// TODO(perf): level 1 and one thread; ZSTD_c_nbWorkers would spread a large model over cores.
constexpr int zstd_level = 1;

std::string hex(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(h));
  return b;
}

fs::path version_dir(const fs::path& dir, uint64_t v) { return dir / ("v" + std::to_string(v)); }
fs::path full_dir(const fs::path& dir, uint64_t v) {
  return dir / ("v" + std::to_string(v) + "-full");
}

// Byte offsets of each tensor in the flat buffer, plus the total at the end.
std::vector<int64_t> byte_offsets(const llm::flat_params& p) {
  std::vector<int64_t> out{0};
  const int64_t es = p.buffer().element_size();
  for (const auto& shape : p.shapes()) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    out.push_back(out.back() + n * es);
  }
  return out;
}

// The bytes of `p`'s buffer as a CPU kByte tensor (a view of it when it already is on the CPU).
at::Tensor buffer_bytes(const llm::flat_params& p) {
  return cpu_contiguous(p.buffer()).view(at::kByte);
}

std::vector<uint8_t> compress(const uint8_t* src, size_t n) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  size_t r = ZSTD_compress(out.data(), out.size(), src, n, zstd_level);
  TORCH_CHECK(!ZSTD_isError(r), "disk_delta: zstd compression failed: ", ZSTD_getErrorName(r));
  out.resize(r);
  return out;
}

void write_file(const fs::path& path, const void* data, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw delta_error("disk_delta: cannot create " + path.string());
  bool ok = n == 0 || std::fwrite(data, 1, n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw delta_error("disk_delta: cannot write " + path.string());
}

std::optional<std::vector<uint8_t>> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<uint8_t> out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return out;
}

// A version directory's manifest, or nullopt when it cannot be read.
std::optional<json> read_manifest(const fs::path& vdir) {
  auto bytes = read_file(vdir / "manifest.json");
  if (!bytes) return std::nullopt;
  const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  if (!runtime::json_nesting_problem(text).empty()) return std::nullopt;
  json m = json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return std::nullopt;
  return m;
}

}  // namespace

// -- writer ------------------------------------------------------------------------------------

delta_writer::delta_writer(fs::path dir, uint32_t full_every)
    : dir_(std::move(dir)), full_every_(full_every) {
  fs::create_directories(dir_);
}

fs::path delta_writer::publish(const llm::flat_params& p, uint64_t version) {
  if (has_last_ && version <= last_version_)
    throw delta_error("disk_delta: publish of version " + std::to_string(version) +
                      " after version " + std::to_string(last_version_) + " in " + dir_.string());
  at::Tensor cur = buffer_bytes(p);
  bool full = !has_last_ || last_.numel() != cur.numel() ||
              (full_every_ > 0 && since_full_ + 1 >= full_every_);
  fs::path out = write(cur, p, version, full, version_dir(dir_, version));
  remember(cur, p, version);
  since_full_ = full ? 0 : since_full_ + 1;
  prune();
  return out;
}

fs::path delta_writer::write_full(const llm::flat_params& p, uint64_t version) {
  if (has_last_ && version < last_version_)
    throw delta_error("disk_delta: full copy of version " + std::to_string(version) +
                      " after version " + std::to_string(last_version_) + " in " + dir_.string());
  at::Tensor cur = buffer_bytes(p);
  // A version already published (as a delta) keeps its directory; its full copy goes beside it.
  bool published = has_last_ && version == last_version_;
  fs::path out = write(cur, p, version, true,
                       published ? full_dir(dir_, version) : version_dir(dir_, version));
  remember(cur, p, version);
  since_full_ = 0;
  prune();
  return out;
}

void delta_writer::remember(const at::Tensor& cur, const llm::flat_params& p, uint64_t version) {
  // On the CPU `cur` is the model's own buffer, which the trainer goes on updating.
  last_ = cur.is_alias_of(p.buffer()) ? cur.clone() : cur;
  last_version_ = version;
  has_last_ = true;
}

fs::path delta_writer::write(const at::Tensor& cur, const llm::flat_params& p, uint64_t version,
                             bool full, const fs::path& target) {
  fs::path tmp = dir_ / (".tmp-" + target.filename().string() + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const auto offsets = byte_offsets(p);
  const auto* now = cur.data_ptr<uint8_t>();
  const auto* before = full ? nullptr : last_.data_ptr<uint8_t>();

  json tensors = json::array();
  std::vector<uint8_t> x;
  for (size_t i = 0; i < p.names().size(); ++i) {
    const int64_t off = offsets[i], n = offsets[i + 1] - offsets[i];
    std::vector<uint8_t> packed = compress(now + off, n);
    std::string encoding = "raw";
    if (before) {
      x.resize(n);
      for (int64_t j = 0; j < n; ++j) x[j] = now[off + j] ^ before[off + j];
      std::vector<uint8_t> xp = compress(x.data(), n);
      if (xp.size() < packed.size()) packed = std::move(xp), encoding = "xor";
    }
    char file[32];
    std::snprintf(file, sizeof(file), "t%05zu.zst", i);
    write_file(tmp / file, packed.data(), packed.size());
    tensors.push_back({{"name", p.names()[i]},
                       {"file", file},
                       {"encoding", encoding},
                       {"bytes", n},
                       {"compressed_bytes", packed.size()},
                       {"compressed_xxh3", hex(bytes_hash(packed.data(), packed.size()))},
                       {"xxh3", hex(bytes_hash(now + off, n))}});
  }
  json m = {{"format", "milesrt.disk_delta/1"},
            {"version", version},
            {"base", full ? json(nullptr) : json(last_version_)},
            {"dtype", std::string(c10::toString(p.buffer().scalar_type()))},
            {"bytes", offsets.back()},
            {"tensors", std::move(tensors)}};
  std::string text = m.dump(1);
  write_file(tmp / "manifest.json", text.data(), text.size());
  fs::remove_all(target);  // a version left by an earlier writer of this directory
  fs::rename(tmp, target);
  return target;
}

void delta_writer::prune() {
  // version -> directories; the newest full copy is kept whatever its version.
  std::map<uint64_t, std::vector<fs::path>> versions;
  std::optional<std::pair<uint64_t, fs::path>> newest_full;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() < 2 || name[0] != 'v' || !e.is_directory(ec)) continue;
    bool suffix = name.size() > 5 && name.compare(name.size() - 5, 5, "-full") == 0;
    std::string digits = name.substr(1, name.size() - 1 - (suffix ? 5 : 0));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    uint64_t v = std::stoull(digits);
    versions[v].push_back(e.path());
    bool full = suffix;
    if (!full) {
      auto m = read_manifest(e.path());
      full = m && m->contains("base") && (*m)["base"].is_null();
    }
    if (full && (!newest_full || v >= newest_full->first)) newest_full = {{v, e.path()}};
  }
  size_t keep = 2;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (keep > 0) {
      --keep;
      continue;
    }
    for (const auto& d : it->second)
      if (!newest_full || d != newest_full->second) fs::remove_all(d, ec);
  }
}

// -- reader ------------------------------------------------------------------------------------

namespace {

// Checks a manifest's header against the version asked for and the model `p`: its version, its
// base (none when `need_full`, else the version the model holds), the dtype and the tensor count.
void check_header(const json& m, const std::string& where, const fs::path& vdir, uint64_t version,
                  std::optional<uint64_t> have, bool need_full, const llm::flat_params& p) {
  const fs::path mpath = vdir / "manifest.json";
  const std::string dtype = c10::toString(p.buffer().scalar_type());
  if (m.at("version").get<uint64_t>() != version)
    throw delta_error(where + mpath.string() + " is of version " +
                      std::to_string(m.at("version").get<uint64_t>()));
  const json& base = m.at("base");
  if (need_full && !base.is_null())
    throw delta_error(where + "no full copy: " + vdir.string() + " is a delta on version " +
                      std::to_string(base.get<uint64_t>()));
  if (!base.is_null() && (!have || base.get<uint64_t>() != *have))
    throw delta_error(where + vdir.string() + " is a delta on version " +
                      std::to_string(base.get<uint64_t>()) + ", the model holds version " +
                      (have ? std::to_string(*have) : "unknown"));
  if (m.at("dtype").get<std::string>() != dtype)
    throw delta_error(where + mpath.string() + " holds " + m.at("dtype").get<std::string>() +
                      " weights, the model is " + dtype);
  const json& ts = m.at("tensors");
  if (!ts.is_array() || ts.size() != p.names().size())
    throw delta_error(where + mpath.string() + " lists " + std::to_string(ts.size()) +
                      " tensors, the model has " + std::to_string(p.names().size()));
}

// Reads the tensors of one version's directory into a staged buffer, each checked against its
// manifest entry; an xor tensor is applied to the bytes the model `p` holds.
struct tensor_reader {
  const llm::flat_params& p;
  const fs::path& vdir;
  const std::string& where;
  bool full;            // the version is a full copy (no base)
  uint8_t* out;         // the staged buffer
  at::Tensor old = {};  // the model's bytes, read only for xor tensors
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx{ZSTD_createDCtx(), &ZSTD_freeDCtx};

  // Tensor `i` of the model (`n` bytes at `off`) from manifest entry `t`.
  void read(const json& t, size_t i, int64_t off, int64_t n) {
    const std::string& name = p.names()[i];
    const std::string file = t.at("file").get<std::string>();
    const std::string what = where + "tensor '" + name + "' (" + (vdir / file).string() + "): ";
    if (t.at("name").get<std::string>() != name)
      throw delta_error(what + "manifest names tensor " + std::to_string(i) + " '" +
                        t.at("name").get<std::string>() + "'");
    if (t.at("bytes").get<int64_t>() != n)
      throw delta_error(what + "size mismatch: " + std::to_string(t.at("bytes").get<int64_t>()) +
                        " bytes in the manifest, " + std::to_string(n) + " in the model");
    if (file.find('/') != std::string::npos || file.find("..") != std::string::npos)
      throw delta_error(what + "bad file name");
    auto packed = read_file(vdir / file);
    if (!packed) throw delta_error(what + "missing or unreadable file");
    if (packed->size() != t.at("compressed_bytes").get<uint64_t>())
      throw delta_error(what + "size mismatch: " + std::to_string(packed->size()) +
                        " bytes, the manifest says " +
                        std::to_string(t.at("compressed_bytes").get<uint64_t>()));
    if (hex(bytes_hash(packed->data(), packed->size())) !=
        t.at("compressed_xxh3").get<std::string>())
      throw delta_error(what + "checksum mismatch of the compressed bytes");
    size_t r = ZSTD_decompressDCtx(dctx.get(), out + off, n, packed->data(), packed->size());
    if (ZSTD_isError(r)) throw delta_error(what + "bad zstd data: " + ZSTD_getErrorName(r));
    if (static_cast<int64_t>(r) != n)
      throw delta_error(what + "size mismatch: decompressed to " + std::to_string(r) +
                        " bytes, expected " + std::to_string(n));
    const std::string encoding = t.at("encoding").get<std::string>();
    if (encoding == "xor") {
      if (full) throw delta_error(what + "xor tensor in a full copy");
      if (!old.defined()) old = buffer_bytes(p);
      const auto* o = old.data_ptr<uint8_t>();
      for (int64_t j = 0; j < n; ++j) out[off + j] ^= o[off + j];
    } else if (encoding != "raw") {
      throw delta_error(what + "unknown encoding '" + encoding + "'");
    }
    if (hex(bytes_hash(out + off, n)) != t.at("xxh3").get<std::string>())
      throw delta_error(what + "checksum mismatch of the resulting tensor" +
                        (encoding == "xor" ? " (does the model hold the base version?)" : ""));
  }
};

// Reads and verifies version `version` in `vdir` against `p` (holding `have`, when given) and
// returns the new buffer's bytes; touches nothing of `p`.
at::Tensor load_version(const llm::flat_params& p, const fs::path& vdir, uint64_t version,
                        std::optional<uint64_t> have, bool need_full) {
  const std::string where = "disk_delta: version " + std::to_string(version) + ": ";
  if (!fs::is_directory(vdir)) throw delta_error(where + "missing directory " + vdir.string());
  const fs::path mpath = vdir / "manifest.json";
  auto m = read_manifest(vdir);
  if (!m) throw delta_error(where + "missing or unreadable " + mpath.string());

  const auto offsets = byte_offsets(p);
  at::Tensor staged;
  try {
    check_header(*m, where, vdir, version, have, need_full, p);
    const json& ts = m->at("tensors");
    staged = at::empty({offsets.back()}, at::TensorOptions().dtype(at::kByte));
    tensor_reader reader{p, vdir, where, m->at("base").is_null(), staged.data_ptr<uint8_t>()};
    for (size_t i = 0; i < p.names().size(); ++i)
      reader.read(ts[i], i, offsets[i], offsets[i + 1] - offsets[i]);
  } catch (const json::exception& e) {
    throw delta_error(where + "bad manifest " + mpath.string() + ": " + e.what());
  }
  return staged;
}

void commit(llm::flat_params& p, const at::Tensor& staged) {
  p.buffer().detach().copy_(staged.view(p.buffer().scalar_type()));
}

}  // namespace

void delta_reader::apply(llm::flat_params& p, const fs::path& dir, uint64_t have,
                         uint64_t version) {
  commit(p, load_version(p, version_dir(dir, version), version, have, false));
}

void delta_reader::apply_full(llm::flat_params& p, const fs::path& dir, uint64_t version) {
  fs::path d = full_dir(dir, version);
  if (!fs::is_directory(d)) d = version_dir(dir, version);
  commit(p, load_version(p, d, version, std::nullopt, true));
}

// -- the transport -----------------------------------------------------------------------------

bool disk_delta_transport::publish(const published_version& v, weights_update& u) {
  if (!writer_) writer_ = std::make_unique<delta_writer>(options_.dir, options_.full_every);
  writer_->publish(*v.weights, v.version);
  u.location = options_.dir.string();
  const auto& b = v.weights->buffer();
  // An immutable copy on the CPU is held as it is; the trainer's own buffer changes, and a GPU's
  // memory is dearer: those are copied to the CPU.
  held_[v.version] =
      v.frozen && b.is_cpu() ? v.weights : v.weights->copy(b.scalar_type(), at::Device(at::kCPU));
  while (held_.size() > std::max<uint32_t>(1, options_.keep_versions)) held_.erase(held_.begin());
  return false;
}

std::string disk_delta_transport::full_copy(uint64_t version) {
  if (!writer_ || held_.empty()) throw full_copy_refused("has published nothing on disk");
  auto it = held_.find(version);
  if (it == held_.end()) {
    throw full_copy_refused("no longer holds version " + std::to_string(version) + " (it holds " +
                            std::to_string(held_.begin()->first) + ".." +
                            std::to_string(held_.rbegin()->first) + ")");
  }
  return writer_->write_full(*it->second, version).string();
}

apply_result disk_delta_transport::apply(llm::decoder& model, const weights_update& u,
                                         const apply_context& ctx) {
  if (!reader_) reader_ = std::make_unique<delta_reader>();
  apply_result r;
  try {
    reader_->apply(model.mutable_published(), u.location, ctx.have, u.version);
  } catch (const delta_error& e) {
    // Refused (corrupt or missing): ask the publisher for a full copy of this version.
    if (!u.publisher) throw;
    caf::scoped_actor self{u.publisher->home_system()};
    std::string error;
    self->request(u.publisher, std::chrono::seconds(120), fullcopy_atom::value, u.version)
        .receive([](const std::string&) {},
                 [&](caf::error& err) { error = self->system().render(err); });
    if (!error.empty()) {
      throw std::runtime_error(std::string(e.what()) +
                               "; the full copy could not be had: " + error);
    }
    reader_->apply_full(model.mutable_published(), u.location, u.version);
    r.full_copy = true;
  }
  return r;
}

}  // namespace milesrt::weights
