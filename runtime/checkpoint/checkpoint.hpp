#pragma once
/// Checkpoints in the run directory: RUN_DIR/checkpoints/step-N/. A checkpoint is written into
/// step-N.tmp/, renamed, and its manifest.json (every file with its size and its XXH3-64 content
/// hash) is written last; only a folder whose manifest is complete and whose files match it, byte
/// count and hash, counts. A manifest of an older milesrt (sizes, no hashes) is accepted with sizes
/// checked and a warning.

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
  /// Writes one file of the checkpoint, hashing it as it goes (throws with the path on I/O errors).
  void put_bytes(const std::string& name, const std::vector<uint8_t>& bytes);
  /// Renames the folder into place and writes the manifest with `fields`, every file's byte count
  /// and content hash (the actors' own files are hashed here, read back once); returns the final
  /// folder.
  std::filesystem::path commit(const std::map<std::string, std::string>& fields);

 private:
  std::filesystem::path final_, tmp_;
  std::map<std::string, uint64_t> hashed_;  ///< put_bytes's files: hash computed while writing
};

/// How a checkpoint folder stands against its manifest.
struct checkpoint_check {
  /// Empty when the folder verifies; otherwise why not, naming the file or field.
  std::string problem;
  /// The folder has no manifest.json: a checkpoint whose writing was cut off (not corrupt).
  bool unfinished = false;
  /// Verified by byte counts only: its manifest (of an older milesrt) holds no content hashes.
  bool sizes_only = false;
  bool ok() const { return problem.empty(); }
};

/// Checks a committed folder: the manifest's form, its `step` field against `step` (when given),
/// every listed file's byte count and content hash, and that no file lies there unlisted.
checkpoint_check check_checkpoint(const std::filesystem::path& dir,
                                  std::optional<uint64_t> step = std::nullopt);

class checkpoint_reader {
 public:
  /// Opens a committed checkpoint folder; throws naming the folder when it does not verify.
  explicit checkpoint_reader(const std::filesystem::path& dir);
  std::vector<uint8_t> get_bytes(const std::string& name) const;
  std::filesystem::path actor_dir(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::map<std::string, std::string>& fields() const { return fields_; }

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::string> fields_;
};

/// What a search of RUN_DIR/checkpoints found: the newest checkpoint that verifies, and one line
/// for each entry passed over (a newer checkpoint that does not verify, a folder whose name is not
/// `step-N`), newest first. Older checkpoints than the one chosen are not read.
struct checkpoint_search {
  std::optional<std::filesystem::path> newest;
  uint64_t step = 0;  ///< newest's step (its folder's number)
  std::vector<std::string> warnings;
  /// A newer checkpoint whose manifest was written but whose files do not match it (corrupt, not
  /// merely unfinished): the line naming it, for `--strict-resume`.
  std::optional<std::string> newer_corrupt;
};

/// Searches RUN_DIR/checkpoints from the highest step down, reading (and hashing) each folder
/// until one verifies.
checkpoint_search find_checkpoint(const std::filesystem::path& run_dir);

/// The newest committed checkpoint under RUN_DIR/checkpoints, if any (find_checkpoint's newest).
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

}  // namespace milesrt::runtime
