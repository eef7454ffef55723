#pragma once
/// Checkpoints in the run directory: RUN_DIR/checkpoints/step-N/. A checkpoint is written into
/// step-N.tmp/, renamed, and its manifest.json (every file with its size) is written last; only a
/// folder whose manifest is complete and matches its files counts.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace milesrt::runtime {

class checkpoint_writer {
 public:
  checkpoint_writer(const std::filesystem::path& run_dir, uint64_t step);
  /// A folder for one actor's own files (created on demand).
  std::filesystem::path actor_dir(const std::string& key) const;
  /// Writes one file of the checkpoint (throws with the path on I/O errors).
  void put_bytes(const std::string& name, const std::vector<uint8_t>& bytes);
  /// Renames the folder into place and writes the manifest with `fields`; returns the final folder.
  std::filesystem::path commit(const std::map<std::string, std::string>& fields);

 private:
  std::filesystem::path final_, tmp_;
};

class checkpoint_reader {
 public:
  /// Opens a committed checkpoint folder; throws naming the folder when it is incomplete.
  explicit checkpoint_reader(const std::filesystem::path& dir);
  std::vector<uint8_t> get_bytes(const std::string& name) const;
  std::filesystem::path actor_dir(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::map<std::string, std::string>& fields() const { return fields_; }

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::string> fields_;
};

/// The newest committed checkpoint under RUN_DIR/checkpoints, if any. Incomplete ones (no manifest,
/// a file missing or of the wrong size) are skipped.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

}  // namespace milesrt::runtime
