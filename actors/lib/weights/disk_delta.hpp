#pragma once
/// The disk_delta transport: a trainer writes each version into a shared directory as a
/// zstd-compressed delta against the version before it, and engines apply the deltas.
///
/// Layout: `dir/v<version>/` holds one file per tensor (`t<index>.zst`) and `manifest.json`,
/// written last inside a temporary directory that is then renamed, so a reader sees a version
/// complete or not at all. Each tensor is stored either as `xor` (its bytes XOR the previous
/// version's, which is mostly zero bytes after a small optimizer step) or `raw`, whichever
/// compresses smaller; a full copy (manifest "base": null) stores every tensor raw. A full copy
/// of a version first published as a delta goes to `dir/v<version>-full/`.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

/// A version cannot be applied (missing or corrupt file, wrong base, sizes that do not match the
/// model); the message names the version, the file and the tensor.
struct delta_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Writes versions of one model's weights (the publisher side); keeps a CPU copy of the last one.
class delta_writer {
 public:
  /// Writes into `dir` (created if needed); every `full_every`-th publish after a full copy is
  /// again a full copy (0: only the first).
  delta_writer(std::filesystem::path dir, uint32_t full_every);

  /// Writes `p` as `version` (greater than the last one): a delta against the last published
  /// version, or a full copy when there is none, the model's size changed or one is due. Prunes
  /// old versions (keeps the last 2 and the newest full copy). Returns the version's directory.
  std::filesystem::path publish(const llm::flat_params& p, uint64_t version);

  /// Writes a full copy of `p` as `version` (for an engine whose delta could not be applied);
  /// `version` must not be older than the last published one. Returns its directory.
  std::filesystem::path write_full(const llm::flat_params& p, uint64_t version);

  /// The last version written (0 before the first).
  uint64_t last_version() const { return last_version_; }

 private:
  std::filesystem::path write(const at::Tensor& cur, const llm::flat_params& p, uint64_t version,
                              bool full, const std::filesystem::path& target);
  void remember(const at::Tensor& cur, const llm::flat_params& p, uint64_t version);
  void prune();

  std::filesystem::path dir_;
  uint32_t full_every_;
  at::Tensor last_;  ///< bytes (kByte, CPU) of the last version written
  uint64_t last_version_ = 0;
  bool has_last_ = false;
  uint32_t since_full_ = 0;  ///< deltas written since the last full copy
};

/// Applies versions written by delta_writer (the engine side).
class delta_reader {
 public:
  /// Applies dir/v<version> to `p`, which must hold version `have` (a full copy applies whatever
  /// `p` holds). Reads and verifies every file (sizes, checksums of the compressed bytes and of
  /// the resulting tensor, the base version) BEFORE touching `p`: on any failure `p` is unchanged
  /// and delta_error names the version, file and tensor.
  void apply(llm::flat_params& p, const std::filesystem::path& dir, uint64_t have,
             uint64_t version);

  /// Applies the full copy of `version` (dir/v<version>-full, else dir/v<version> when that is
  /// one), verified first like apply; throws delta_error when there is none.
  void apply_full(llm::flat_params& p, const std::filesystem::path& dir, uint64_t version);
};

/// The disk_delta transport. The publisher writes each version with a delta_writer and keeps the
/// last `keep_versions` in CPU memory (the immutable copies themselves when handover = copy puts
/// them on the CPU), so that it can write a full copy of a version an engine could not apply
/// after the trainer has moved on. An engine applies each version with a delta_reader; when one
/// is refused it asks the publisher (weights_update::publisher) for a full copy and applies that.
class disk_delta_transport final : public transport {
 public:
  explicit disk_delta_transport(transport_options options = {}) : options_(std::move(options)) {}
  const char* name() const override { return "disk_delta"; }
  bool publish(const published_version& v, weights_update& u) override;
  std::string full_copy(uint64_t version) override;
  apply_result apply(llm::decoder& model, const weights_update& u,
                     const apply_context& ctx) override;

 private:
  transport_options options_;
  std::unique_ptr<delta_writer> writer_;                              ///< the publisher's side
  std::map<uint64_t, std::shared_ptr<const llm::flat_params>> held_;  ///< the publisher's side
  std::unique_ptr<delta_reader> reader_;                              ///< an engine's side
};

}  // namespace milesrt::weights
