#pragma once
/// milesrt's one error model, without CAF: every error has a class that says what its receiver
/// can do about it, and a message that gains context on the way up (as KJ's exceptions do).
///
///   bad_input  the item or request is wrong (malformed, too long, out of range): dropping it and
///              going on is safe; the schedule driver drops the item and counts `items_rejected`
///   transient  may succeed when tried again (a refused connection, a remote 503): the driver
///              restarts a restartable actor within the run's restart limits
///   resource   memory, disk or another resource ran out: the run cannot go on as configured
///   internal   a bug or a broken invariant: the run ends naming the actor
///   cancelled  the work was called off (the run is stopping)
///
/// Code that knows the class throws `failure`; any other exception is classed by its type
/// (`classify`). runtime/core/errors.hpp turns both into CAF errors for actors' answers.

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace milesrt {

enum class errc : uint8_t {
  bad_input = 1,
  transient = 2,
  resource = 3,
  internal = 4,
  cancelled = 5,
};

/// "bad_input", "transient", ...
std::string to_string(errc c);
/// The class in words for a message: "bad input", "transient", ...
std::string_view describe(errc c);

/// An error whose class the thrower knows.
class failure : public std::runtime_error {
 public:
  failure(errc code, std::string message) : std::runtime_error(message), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

/// Throws a failure of class `code`.
[[noreturn]] inline void fail(errc code, std::string message) {
  throw failure(code, std::move(message));
}

/// The class of an exception: a failure's own; std::invalid_argument (what checks of input throw)
/// is bad input (out_of_range and the like are left internal: they are mostly a bug's `at()`);
/// bad_alloc and any exception saying "out of memory" (a device allocator's) are resource; a
/// system_error by its code (timed out, refused, reset, unreachable: transient; out of memory or
/// space, too many files: resource); anything else is internal.
errc classify(const std::exception& e) noexcept;

/// The class and message of the exception being handled (call inside a catch block); a non-standard
/// exception is internal, "unknown exception".
std::pair<errc, std::string> current_failure();

/// Runs `f`; an exception leaving it is rethrown as a failure of the same class whose message is
/// "`what`: <its message>" — the context a caller adds on the way up.
template <class F>
decltype(auto) in_context(std::string_view what, F&& f) {
  try {
    return f();
  } catch (...) {
    auto [code, message] = current_failure();
    throw failure(code, std::string(what) + ": " + message);
  }
}

}  // namespace milesrt
