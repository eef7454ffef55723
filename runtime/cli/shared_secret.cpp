#include "runtime/cli/shared_secret.hpp"

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace milesrt::cli {

std::string load_secret(const std::string& file) {
  if (file.empty()) {
    const char* env = std::getenv(kSecretVariable);
    return env == nullptr ? "" : env;
  }
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    throw std::invalid_argument("--secret-file " + file +
                                (in.eof() ? ": is empty" : ": cannot be read"));
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  if (line.empty())
    throw std::invalid_argument("--secret-file " + file + ": its first line is empty");
  return line;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace milesrt::cli
