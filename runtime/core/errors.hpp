#pragma once
/// The error model (runtime/core/failure.hpp) as CAF errors: `milesrt::errc` is an error category
/// of its own ("milesrt", beside CAF's `sec`), so an actor's answer carries its class to the
/// schedule driver, which acts by class (docs/errors.md).

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <exception>
#include <string>
#include <string_view>

#include "runtime/core/failure.hpp"

CAF_ERROR_CODE_ENUM(milesrt::errc, "milesrt")

namespace caf {
class actor_system_config;
}

namespace milesrt::runtime {

/// An error of class `code` saying `message`.
caf::error make_failure(errc code, std::string message);

/// The exception `e` as an error of its class (failure.hpp's `classify`), its message prefixed
/// with `context` ("actor 'learner'") when there is one.
caf::error to_error(const std::exception& e, std::string_view context = {});

/// The class of any error an actor can answer with: milesrt's own; of CAF's, a missed deadline is
/// transient, an invalid argument is bad input, the rest (a receiver that died, say) internal.
errc class_of(const caf::error& err);

/// The error's own words: a milesrt error's message, otherwise CAF's rendering of it.
std::string message_of(const caf::error& err);

/// The same error (class kept) with "`context`: " before its message.
caf::error add_context(const caf::error& err, std::string_view context);

/// Lets the actor system render milesrt's errors ("milesrt: bad_input (message)").
void add_error_category(caf::actor_system_config& config);

}  // namespace milesrt::runtime
