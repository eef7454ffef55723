#pragma once
/// safetensors files: the header parser (pure, fuzzed), a memory-mapped reader for single files and
/// sharded checkpoints (model.safetensors.index.json), and a writer in the Hugging Face layout.
/// No libtorch here: tensors are bytes with a dtype and a shape.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace milesrt::llm {

/// A problem with a safetensors file or checkpoint; the message names the file and the tensor.
class safetensors_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class dtype { f32, f16, bf16 };

/// "F32", "F16", "BF16"
const char* to_string(dtype d);
size_t dtype_size(dtype d);

struct tensor_info {
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  ///< byte offsets within the data section
  uint64_t end = 0;
  int64_t numel() const;
};

struct safetensors_header {
  uint64_t header_size = 0;  ///< bytes of JSON after the 8-byte length
  std::map<std::string, tensor_info> tensors;
  std::map<std::string, std::string> metadata;
};

/// Parses and checks the header of a safetensors file held in `bytes` (the whole file, or at least
/// its header when `file_size` gives the full size): length within the file, valid JSON, known
/// dtypes, non-negative shapes, offsets inside the data section, sizes matching shape x dtype, no
/// overlapping tensors. Throws safetensors_error naming `file` and the tensor.
safetensors_header parse_safetensors_header(const uint8_t* bytes, size_t available,
                                            uint64_t file_size, const std::string& file);

/// A tensor inside a mapped file.
struct tensor_view {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  ///< where it came from, for error messages
};

/// A checkpoint folder (or one file): every tensor of model.safetensors, or of the shards listed in
/// model.safetensors.index.json, memory-mapped read-only.
class safetensors_checkpoint {
 public:
  /// `path` is a folder or a .safetensors file. Throws safetensors_error naming what is wrong.
  explicit safetensors_checkpoint(const std::filesystem::path& path);
  ~safetensors_checkpoint();
  safetensors_checkpoint(const safetensors_checkpoint&) = delete;
  safetensors_checkpoint& operator=(const safetensors_checkpoint&) = delete;

  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  /// Throws safetensors_error "<folder>: missing tensor 'name'" when absent.
  const tensor_view& get(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  struct mapping;
  std::filesystem::path path_;
  std::vector<std::unique_ptr<mapping>> files_;
  std::map<std::string, tensor_view> tensors_;
};

/// One tensor to write.
struct tensor_bytes {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

/// Writes `tensors` into one safetensors file (metadata {"format": "pt"}), replacing it. Throws
/// safetensors_error naming the file and the reason when the write fails.
void write_safetensors_file(const std::filesystem::path& file,
                            const std::vector<tensor_bytes>& tensors);

/// Writes tensors into `folder` the way transformers' save_pretrained does: model.safetensors, or
/// model-0000i-of-0000n.safetensors shards of at most `max_shard_bytes` plus
/// model.safetensors.index.json. Metadata {"format": "pt"}.
void write_safetensors(const std::filesystem::path& folder,
                       const std::vector<tensor_bytes>& tensors,
                       uint64_t max_shard_bytes = 5ull << 30);

}  // namespace milesrt::llm
