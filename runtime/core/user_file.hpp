#pragma once
/// Files a user names (a model folder's config and weights, an adapter, a checkpoint's records)
/// are read only when they are regular files: opening a FIFO blocks until someone writes to it,
/// a character device may never end, and a folder reads as nothing. The check is a stat, so it
/// neither blocks nor reads.

#include <filesystem>
#include <string>

namespace milesrt::runtime {

/// "" when `p` is a regular file (symbolic links followed); otherwise what it is instead, for a
/// message that names the file: "no such file", "a FIFO, not a regular file", ...
std::string regular_file_problem(const std::filesystem::path& p);

/// The bytes of the regular file `p`; throws std::runtime_error "P: what is wrong" when it is not
/// one or cannot be read.
std::string read_regular_file(const std::filesystem::path& p);

/// Whether validation looks at the files a graph names (model folders, datasets, templates): yes,
/// except while a `named_files_unread` lives (`milesrt validate --schema-only`), when the kinds'
/// checks read their params alone.
bool named_files_read();

/// While one lives, named_files_read() is false, in every thread.
class named_files_unread {
 public:
  named_files_unread();
  ~named_files_unread();
  named_files_unread(const named_files_unread&) = delete;
  named_files_unread& operator=(const named_files_unread&) = delete;
};

}  // namespace milesrt::runtime
