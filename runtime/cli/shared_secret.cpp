#include "runtime/cli/shared_secret.hpp"

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>

namespace milesrt::cli {

std::string load_secret(const std::string& file, std::string& error) {
  if (file.empty()) {
    const char* env = std::getenv(kSecretVariable);
    return env == nullptr ? "" : env;
  }
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    error = "--secret-file " + file + ": cannot be read";
    if (in.eof()) error = "--secret-file " + file + ": is empty";
    return "";
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  if (line.empty()) error = "--secret-file " + file + ": its first line is empty";
  return line;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace milesrt::cli
