#include "runtime/core/failure.hpp"

#include <new>
#include <system_error>

namespace milesrt {

std::string to_string(errc c) {
  switch (c) {
    case errc::bad_input:
      return "bad_input";
    case errc::transient:
      return "transient";
    case errc::resource:
      return "resource";
    case errc::internal:
      return "internal";
    case errc::cancelled:
      return "cancelled";
  }
  return "internal";
}

std::string_view describe(errc c) {
  switch (c) {
    case errc::bad_input:
      return "bad input";
    case errc::transient:
      return "transient";
    case errc::resource:
      return "out of a resource";
    case errc::internal:
      return "internal error";
    case errc::cancelled:
      return "cancelled";
  }
  return "internal error";
}

namespace {

errc class_of_system_error(const std::error_code& ec) {
  if (ec.category() != std::generic_category() && ec.category() != std::system_category())
    return errc::internal;
  switch (static_cast<std::errc>(ec.value())) {
    case std::errc::timed_out:
    case std::errc::connection_refused:
    case std::errc::connection_reset:
    case std::errc::connection_aborted:
    case std::errc::host_unreachable:
    case std::errc::network_unreachable:
    case std::errc::network_down:
    case std::errc::network_reset:
    case std::errc::resource_unavailable_try_again:
    case std::errc::interrupted:
    case std::errc::broken_pipe:
      return errc::transient;
    case std::errc::not_enough_memory:
    case std::errc::no_space_on_device:
    case std::errc::too_many_files_open:
    case std::errc::too_many_files_open_in_system:
      return errc::resource;
    default:
      return errc::internal;
  }
}

}  // namespace

errc classify(const std::exception& e) noexcept {
  if (const auto* f = dynamic_cast<const failure*>(&e)) return f->code();
  if (dynamic_cast<const std::invalid_argument*>(&e)) return errc::bad_input;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return errc::resource;
  if (const auto* s = dynamic_cast<const std::system_error*>(&e))
    return class_of_system_error(s->code());
  // A device allocator's exception (libtorch's OutOfMemoryError) is known by its words only here.
  if (std::string_view(e.what()).find("out of memory") != std::string_view::npos)
    return errc::resource;
  return errc::internal;
}

std::pair<errc, std::string> current_failure() {
  try {
    throw;
  } catch (const std::exception& e) {
    return {classify(e), e.what()};
  } catch (...) {
    return {errc::internal, "unknown exception"};
  }
}

}  // namespace milesrt
