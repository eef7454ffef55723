#include "runtime/core/user_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace milesrt::runtime {
namespace fs = std::filesystem;

std::string regular_file_problem(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (st.type() == fs::file_type::not_found) return "no such file";
  if (ec) return "cannot read it: " + ec.message();
  switch (st.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::directory:
      return "a folder, not a regular file";
    case fs::file_type::fifo:
      return "a FIFO, not a regular file";
    case fs::file_type::character:
      return "a character device, not a regular file";
    case fs::file_type::block:
      return "a block device, not a regular file";
    case fs::file_type::socket:
      return "a socket, not a regular file";
    default:
      return "not a regular file";
  }
}

std::string read_regular_file(const fs::path& p) {
  if (auto problem = regular_file_problem(p); !problem.empty())
    throw std::runtime_error(p.string() + ": " + problem);
  errno = 0;
  std::ifstream in(p, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    throw std::runtime_error(p.string() + ": cannot read it" +
                             (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
  return text.str();
}

namespace {
std::atomic<int> unread_scopes{0};
}

bool named_files_read() { return unread_scopes.load() == 0; }

named_files_unread::named_files_unread() { ++unread_scopes; }

named_files_unread::~named_files_unread() { --unread_scopes; }

}  // namespace milesrt::runtime
