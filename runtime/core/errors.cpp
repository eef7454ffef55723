#include "runtime/core/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace milesrt::runtime {
namespace {

bool is_milesrt_code(uint8_t c) {
  return c >= static_cast<uint8_t>(errc::bad_input) && c <= static_cast<uint8_t>(errc::cancelled);
}

}  // namespace

caf::error make_failure(errc code, std::string message) {
  return caf::make_error(code, std::move(message));
}

caf::error to_error(const std::exception& e, std::string_view context) {
  std::string message = e.what();
  if (!context.empty()) message = std::string(context) + ": " + message;
  return make_failure(classify(e), std::move(message));
}

errc class_of(const caf::error& err) {
  if (err.category() == caf::atom("milesrt")) {
    return is_milesrt_code(err.code()) ? static_cast<errc>(err.code()) : errc::internal;
  }
  if (err == caf::sec::request_timeout) return errc::transient;
  if (err == caf::sec::invalid_argument) return errc::bad_input;
  return errc::internal;
}

std::string message_of(const caf::error& err) {
  // The context string where there is one (milesrt's errors always have one).
  const auto& ctx = err.context();
  if (ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
  if (err.category() == caf::atom("milesrt")) return to_string(class_of(err));
  return caf::to_string(err);
}

caf::error add_context(const caf::error& err, std::string_view context) {
  if (context.empty()) return err;
  const std::string inner = message_of(err);
  if (err.category() == caf::atom("milesrt"))
    return make_failure(class_of(err), std::string(context) + ": " + inner);
  return caf::error(err.code(), err.category(),
                    caf::make_message(std::string(context) + ": " + inner));
}

void add_error_category(caf::actor_system_config& config) {
  config.add_error_category(
      caf::atom("milesrt"), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
        std::string out = "milesrt: ";
        out += is_milesrt_code(code) ? to_string(static_cast<errc>(code)) : "unknown";
        if (ctx.match_elements<std::string>()) out += " (" + ctx.get_as<std::string>(0) + ")";
        return out;
      });
}

}  // namespace milesrt::runtime
