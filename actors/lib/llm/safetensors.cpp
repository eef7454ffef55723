#include "actors/lib/llm/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace fs = std::filesystem;

const char* to_string(dtype d) {
  switch (d) {
    case dtype::f32:
      return "F32";
    case dtype::f16:
      return "F16";
    case dtype::bf16:
      return "BF16";
  }
  return "?";
}

size_t dtype_size(dtype d) { return d == dtype::f32 ? 4 : 2; }

int64_t tensor_info::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

namespace {

/// Throws safetensors_error "<file>: <what>".
struct header_errors {
  const std::string& file;
  safetensors_error operator()(const std::string& what) const {
    return safetensors_error(file + ": " + what);
  }
};

/// The header's JSON text: the 8-byte little-endian length, checked against the file's size and
/// the bytes read; sets `data_size` to the bytes after the header.
std::string_view header_text(const uint8_t* bytes, size_t available, uint64_t file_size,
                             const header_errors& fail, uint64_t& data_size) {
  if (file_size < 8 || available < 8)
    throw fail("too short for a safetensors header (" + std::to_string(file_size) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > file_size - 8) {
    throw fail("header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(file_size) + " bytes)");
  }
  if (n > available - 8) throw fail("header not fully read");
  data_size = file_size - 8 - n;
  return std::string_view(reinterpret_cast<const char*>(bytes + 8), n);
}

/// The dtype named `d`; throws through `bad` for the others.
template <typename Bad>
dtype parse_dtype(const std::string& d, const Bad& bad) {
  if (d == "F32") return dtype::f32;
  if (d == "F16") return dtype::f16;
  if (d == "BF16") return dtype::bf16;
  throw bad("dtype " + d + " is not supported (F32, F16, BF16)");
}

/// One tensor's entry of the header: dtype, shape and data offsets, checked against each other
/// and against the `data_size` bytes of data.
tensor_info parse_tensor_entry(const std::string& name, nlohmann::json& entry, uint64_t data_size,
                               const header_errors& fail) {
  auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
  if (!entry.is_object()) throw bad("entry is not an object");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw bad("no dtype");
  if (!entry.contains("shape") || !entry["shape"].is_array()) throw bad("no shape");
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2) {
    throw bad("data_offsets must be [begin, end]");
  }
  tensor_info t;
  t.type = parse_dtype(entry["dtype"].get<std::string>(), bad);
  __int128 numel = 1;
  for (auto& s : entry["shape"]) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0)
      throw bad("shape has a negative or non-integer size");
    t.shape.push_back(s.get<int64_t>());
    numel *= s.get<int64_t>();
    if (numel > (__int128(1) << 62)) throw bad("shape is too large");
  }
  for (auto& o : entry["data_offsets"])
    if (!o.is_number_unsigned()) throw bad("data_offsets must be non-negative integers");
  t.begin = entry["data_offsets"][0].get<uint64_t>();
  t.end = entry["data_offsets"][1].get<uint64_t>();
  if (t.begin > t.end)
    throw bad("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
              "] are reversed");
  if (t.end > data_size) {
    throw bad("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
              "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
  }
  if (__int128(t.end - t.begin) != numel * __int128(dtype_size(t.type))) {
    throw bad("holds " + std::to_string(t.end - t.begin) + " bytes but its shape and dtype need " +
              std::to_string(static_cast<uint64_t>(numel * dtype_size(t.type))));
  }
  return t;
}

/// Refuses tensors whose bytes overlap.
void check_no_overlap(const safetensors_header& h, const header_errors& fail) {
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto& [name, t] : h.tensors)
    if (t.end > t.begin) order.emplace_back(t.begin, name);
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& prev = h.tensors.at(order[i - 1].second);
    if (order[i].first < prev.end) {
      throw fail("tensors '" + order[i - 1].second + "' and '" + order[i].second + "' overlap");
    }
  }
}

}  // namespace

safetensors_header parse_safetensors_header(const uint8_t* bytes, size_t available,
                                            uint64_t file_size, const std::string& file) {
  const header_errors fail{file};
  uint64_t data_size = 0;
  const std::string_view text = header_text(bytes, available, file_size, fail, data_size);
  if (auto deep = runtime::json_nesting_problem(text); !deep.empty())
    throw fail("header is " + deep);
  nlohmann::json j;
  try {
    const auto* first = reinterpret_cast<const uint8_t*>(text.data());
    j = nlohmann::json::parse(first, first + text.size());
  } catch (const std::exception& e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw fail("header is not a JSON object");
  safetensors_header h;
  h.header_size = text.size();
  for (auto& item : j.items()) {
    const std::string name = item.key();
    auto& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) throw fail("__metadata__ is not an object");
      for (auto& [k, v] : entry.items())
        if (v.is_string()) h.metadata[k] = v.get<std::string>();
      continue;
    }
    h.tensors[name] = parse_tensor_entry(name, entry, data_size, fail);
  }
  check_no_overlap(h, fail);
  return h;
}

struct safetensors_checkpoint::mapping {
  std::string file;
  void* base = nullptr;
  size_t size = 0;
  ~mapping() {
    if (base != nullptr && size > 0) munmap(base, size);
  }
};

namespace {

/// The shards model.safetensors.index.json lists, in order of first mention; `expected` receives
/// its weight_map (tensor -> shard).
std::vector<fs::path> indexed_shards(const fs::path& path, const fs::path& index,
                                     std::map<std::string, std::string>& expected) {
  std::string text;
  try {
    text = runtime::read_regular_file(index);
  } catch (const std::runtime_error& e) {
    throw safetensors_error(e.what());
  }
  if (auto deep = runtime::json_nesting_problem(text); !deep.empty())
    throw safetensors_error(index.string() + ": " + deep);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw safetensors_error(index.string() + ": not valid JSON: " + e.what());
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw safetensors_error(index.string() + ": no weight_map");
  }
  std::vector<std::string> shards;
  for (auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string())
      throw safetensors_error(index.string() + ": tensor '" + name + "' maps to no file");
    expected[name] = shard.get<std::string>();
    if (std::find(shards.begin(), shards.end(), shard.get<std::string>()) == shards.end()) {
      shards.push_back(shard.get<std::string>());
    }
  }
  std::vector<fs::path> files;
  for (const auto& s : shards) files.push_back(path / s);
  return files;
}

/// The files of a checkpoint at `path`: a folder's index and its shards, its model.safetensors,
/// or the file `path` itself; `expected` receives the index's weight_map, if any.
std::vector<fs::path> checkpoint_files(const fs::path& path,
                                       std::map<std::string, std::string>& expected) {
  if (!fs::is_directory(path)) return {path};
  auto index = path / "model.safetensors.index.json";
  if (fs::exists(index)) return indexed_shards(path, index, expected);
  if (fs::exists(path / "model.safetensors")) return {path / "model.safetensors"};
  throw safetensors_error(path.string() + ": no model.safetensors or model.safetensors.index.json");
}

/// A file mapped read-only: its first byte and its size (base null for an empty file).
struct mapped_region {
  void* base = nullptr;
  size_t size = 0;
};

/// Maps the regular file `f` (`indexed`: listed in an index, which its error names).
mapped_region map_file(const fs::path& f, bool indexed) {
  if (!fs::exists(f)) {
    throw safetensors_error(f.string() +
                            (indexed ? ": missing (listed in the index)" : ": no such file"));
  }
  // Before open(): opening a FIFO blocks until a writer comes.
  if (auto problem = runtime::regular_file_problem(f); !problem.empty())
    throw safetensors_error(f.string() + ": " + problem);
  struct stat st {};
  int fd = ::open(f.c_str(), O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    throw safetensors_error(f.string() + ": cannot open: " + std::strerror(errno));
  }
  mapped_region m;
  m.size = static_cast<size_t>(st.st_size);
  if (m.size > 0) {
    m.base = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m.base == MAP_FAILED) {
      m.base = nullptr;
      ::close(fd);
      throw safetensors_error(f.string() + ": cannot map: " + std::strerror(errno));
    }
  }
  ::close(fd);
  return m;
}

}  // namespace

safetensors_checkpoint::safetensors_checkpoint(const fs::path& path) : path_(path) {
  std::map<std::string, std::string> expected;  // from the index: tensor -> shard
  const std::vector<fs::path> files = checkpoint_files(path, expected);
  for (const auto& f : files) {
    const mapped_region region = map_file(f, !expected.empty());
    auto m = std::make_unique<mapping>();
    m->file = f.string();
    m->base = region.base;
    m->size = region.size;
    auto* bytes = static_cast<const uint8_t*>(m->base);
    auto h = parse_safetensors_header(bytes, m->size, m->size, m->file);
    const uint8_t* data = bytes + 8 + h.header_size;
    for (auto& [name, t] : h.tensors) {
      if (tensors_.count(name))
        throw safetensors_error(m->file + ": tensor '" + name + "' appears in two files");
      auto e = expected.find(name);
      if (!expected.empty() && (e == expected.end() || path / e->second != f)) {
        throw safetensors_error(m->file + ": tensor '" + name + "' is not where the index says");
      }
      tensors_[name] = {
          name, t.type, t.shape, data + t.begin, static_cast<size_t>(t.end - t.begin), m->file};
    }
    files_.push_back(std::move(m));
  }
  for (const auto& [name, shard] : expected) {
    if (!tensors_.count(name)) {
      throw safetensors_error((path / shard).string() + ": missing tensor '" + name +
                              "' (listed in the index)");
    }
  }
}

safetensors_checkpoint::~safetensors_checkpoint() = default;

const tensor_view& safetensors_checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw safetensors_error(path_.string() + ": missing tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> safetensors_checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : tensors_) out.push_back(n);
  return out;
}

namespace {

void write_one(const fs::path& file, const std::vector<const tensor_bytes*>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto* t : tensors) {
    header[t->name] = {{"dtype", to_string(t->type)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->nbytes}}};
    offset += t->nbytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text += ' ';  // data starts 8-byte aligned
  errno = 0;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto* t : tensors)
    out.write(static_cast<const char*>(t->data), static_cast<std::streamsize>(t->nbytes));
  out.flush();
  if (!out) {
    throw safetensors_error(file.string() + ": write failed" +
                            (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
}

}  // namespace

void write_safetensors_file(const fs::path& file, const std::vector<tensor_bytes>& tensors) {
  std::vector<const tensor_bytes*> all;
  for (const auto& t : tensors) all.push_back(&t);
  write_one(file, all);
}

void write_safetensors(const fs::path& folder, const std::vector<tensor_bytes>& tensors,
                       uint64_t max_shard_bytes) {
  fs::create_directories(folder);
  std::vector<std::vector<const tensor_bytes*>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const auto& t : tensors) {
    if (in_shard > 0 && in_shard + t.nbytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.nbytes;
    total += t.nbytes;
  }
  if (shards.size() == 1) {
    write_one(folder / "model.safetensors", shards[0]);
    fs::remove(folder / "model.safetensors.index.json");
    return;
  }
  nlohmann::json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = nlohmann::json::object();
  char name[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    write_one(folder / name, shards[i]);
    for (const auto* t : shards[i]) index["weight_map"][t->name] = name;
  }
  errno = 0;
  std::ofstream out(folder / "model.safetensors.index.json", std::ios::trunc);
  out << index.dump(2) << "\n";
  out.flush();
  if (!out) {
    throw safetensors_error((folder / "model.safetensors.index.json").string() + ": write failed" +
                            (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
}

}  // namespace milesrt::llm
