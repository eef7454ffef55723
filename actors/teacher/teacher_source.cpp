#include "actors/teacher/teacher_source.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "actors/lib/llm/output_logprobs.hpp"
#include "actors/lib/llm/teacher_protocol.hpp"
#include "runtime/core/failure.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_client.hpp"

namespace milesrt::teacher {
namespace {

class local_source final : public teacher_source {
 public:
  local_source(const llm::decoder& model, std::string folder, double temperature)
      : model_(model), folder_(std::move(folder)), temperature_(temperature) {}
  std::vector<std::vector<float>> score(const llm::sample_group& group) override {
    return llm::output_logprobs(model_, temperature_, group);
  }
  llm::tokenizer_fingerprint fingerprint() override { return llm::fingerprint_of(folder_); }

 private:
  const llm::decoder& model_;
  std::string folder_;
  double temperature_;
};

class remote_source final : public teacher_source {
 public:
  explicit remote_source(remote_teacher_config c) : config_(std::move(c)) {
    while (!config_.url.empty() && config_.url.back() == '/') config_.url.pop_back();
  }
  std::vector<std::vector<float>> score(const llm::sample_group& group) override {
    const std::string path = "/v1/logprobs";
    const auto body = post(path, llm::teacher_request_body(group, config_.temperature));
    try {
      return llm::parse_teacher_answer(body, group);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("POST " + config_.url + path + ": " + e.what());
    }
  }
  llm::tokenizer_fingerprint fingerprint() override {
    const std::string path = "/v1/tokenizer";
    try {
      return llm::fingerprint_from_json(post(path, "{}"));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("POST " + config_.url + path + ": " + e.what());
    }
  }

 private:
  /// The body of a 200 answer to `body` POSTed at the base URL + `path`.
  std::string post(const std::string& path, const std::string& body) const {
    const std::string target = config_.url + path, where = "POST " + target + ": ";
    const auto url = in_context("POST " + target, [&] { return runtime::parse_http_url(target); });
    const auto res = runtime::http_post_retrying(
        url, body, {config_.retries, config_.backoff_seconds, config_.timeout_seconds},
        "POST " + target);
    if (res.status != 200)
      throw std::runtime_error(where + "HTTP " + std::to_string(res.status) +
                               (res.body.empty() ? "" : ": " + runtime::excerpt(res.body)));
    return res.body;
  }

  remote_teacher_config config_;
};

}  // namespace

std::unique_ptr<teacher_source> local_teacher(const llm::decoder& model, std::string folder,
                                              double temperature) {
  return std::make_unique<local_source>(model, std::move(folder), temperature);
}

std::unique_ptr<teacher_source> remote_teacher(remote_teacher_config config) {
  return std::make_unique<remote_source>(std::move(config));
}

void require_same_tokenizer(const llm::tokenizer_fingerprint& teacher,
                            const std::string& student_folder) {
  const auto student = llm::fingerprint_of(student_folder);
  const auto diff = llm::first_difference(teacher, "teacher", student, "student");
  if (!diff.empty())
    throw std::invalid_argument("the teacher's tokenizer differs from the student's (" +
                                student_folder + "): " + diff);
}

}  // namespace milesrt::teacher
