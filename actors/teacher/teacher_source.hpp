#pragma once
/// Where the teacher kind's log-probs come from: a local model folder (a batched prefill of each
/// group on the teacher's own device) or a remote server speaking the teacher protocol
/// (actors/lib/llm/teacher_protocol.hpp). Either one first proves its tokenizer is the student's.

#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/tokenizer_fingerprint.hpp"

namespace milesrt::teacher {

class teacher_source {
 public:
  virtual ~teacher_source() = default;
  /// Per sample of `group`, the teacher's log-probs of its output tokens.
  virtual std::vector<std::vector<float>> score(const llm::sample_group& group) = 0;
  /// The teacher's tokenizer fingerprint.
  virtual llm::tokenizer_fingerprint fingerprint() = 0;
};

/// A local teacher over `model` (frozen, not owned: it must outlive the source).
std::unique_ptr<teacher_source> local_teacher(const llm::decoder& model, std::string folder,
                                              double temperature);

struct remote_teacher_config {
  std::string url;  ///< the server's base URL
  double temperature = 1.0;
  double timeout_seconds = 60;   ///< per attempt
  uint32_t retries = 2;          ///< further attempts after a failed one
  double backoff_seconds = 0.2;  ///< before the first retry; doubles each time (at most 5 s)
};

/// A remote teacher. Timeouts, refused connections and 5xx answers are retried with backoff; a
/// 4xx or malformed answer is not. A request that fails on every attempt throws a transient
/// failure "POST <url>: <problem>".
std::unique_ptr<teacher_source> remote_teacher(remote_teacher_config config);

/// Throws std::invalid_argument "the teacher's tokenizer differs from the student's (<student
/// folder>): <first difference>" unless `teacher` equals the student folder's tokenizer.
void require_same_tokenizer(const llm::tokenizer_fingerprint& teacher,
                            const std::string& student_folder);

}  // namespace milesrt::teacher
