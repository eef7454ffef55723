#pragma once
/// The shared secret of a run and its worker processes: `milesrt run --listen` on an address other
/// machines can reach requires one, and a worker must present the same to join.

#include <string>

namespace milesrt::cli {

/// The environment variable read when no --secret-file is given.
inline constexpr const char* kSecretVariable = "MILESRT_SECRET";

/// The secret: the first line of `file` (trailing blanks dropped) when `file` is not empty, else
/// $MILESRT_SECRET, else "". Throws std::invalid_argument (one line naming the file) when the file
/// cannot be read or holds an empty first line.
std::string load_secret(const std::string& file);

/// Whether `host` (of --listen HOST:PORT) reaches this machine only: localhost, 127.x.y.z, ::1.
bool is_loopback(const std::string& host);

}  // namespace milesrt::cli
