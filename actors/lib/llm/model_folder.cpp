#include "actors/lib/llm/model_folder.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/safetensors.hpp"

namespace milesrt::llm {

namespace {
std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}
}  // namespace

void check_weights(const safetensors_checkpoint& ckpt, const model_config& c) {
  for (const auto& [name, shape] : parameter_specs(c)) {
    const auto& t = ckpt.get(name);
    if (t.shape != shape) {
      throw safetensors_error(t.file + ": tensor '" + name + "' has shape " + dims(t.shape) +
                              ", the config needs " + dims(shape));
    }
  }
}

std::string model_folder_problem(const std::filesystem::path& dir, model_config* config) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return "'" + dir.string() + "' is not a folder (a Hugging Face model folder)";
  try {
    model_config c = load_config(dir);
    // Maps the files and parses every header (offsets checked against each file's size); the
    // weights' bytes are not read.
    safetensors_checkpoint ckpt(dir);
    check_weights(ckpt, c);
    if (config != nullptr) *config = std::move(c);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void write_text_file(const std::filesystem::path& file, const std::string& text) {
  errno = 0;
  std::ofstream out(file, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) {
    throw std::runtime_error("cannot write " + file.string() +
                             (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
}

}  // namespace milesrt::llm
