#define PCRE2_CODE_UNIT_WIDTH 8
#include "actors/lib/llm/tokenizer/regex.hpp"

#include <pcre2.h>

#include <stdexcept>

namespace milesrt::llm {
namespace {

// Per-thread match state: PCRE2 match data and JIT stacks must not be shared between threads.
struct match_state {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  match_state() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~match_state() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

match_state& state() {
  thread_local match_state s;
  return s;
}

}  // namespace

regex::regex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw std::invalid_argument("regex /" + pattern + "/ does not compile at offset " +
                                std::to_string(offset) + ": " + reinterpret_cast<char*>(buf));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is absent
  code_ = code;
}

regex::~regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void regex::find_all(std::string_view text,
                     const std::function<void(size_t, size_t)>& on_match) const {
  auto* code = static_cast<pcre2_code*>(code_);
  match_state& s = state();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof buf);
      throw std::runtime_error("regex /" + pattern_ +
                               "/: match failed: " + reinterpret_cast<char*>(buf));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    size_t start = ov[0], end = ov[1];
    on_match(start, end);
    if (end > start) {
      at = end;
    } else {
      if (end >= text.size()) return;
      at = end + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    }
  }
}

bool regex::search(std::string_view text) const {
  match_state& s = state();
  int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()),
                       text.size(), 0, PCRE2_NO_UTF_CHECK, s.data, s.context);
  return rc >= 0;
}

}  // namespace milesrt::llm
