#pragma once
/// Test helpers for any actor kind's unit tests: an actor system
/// with the kinds' message types, an actor_setup around a params struct, and requests with a
/// deadline. Header-only; tests include it.

#include <capnp/dynamic.h>
#include <capnp/message.h>

#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "runtime/core/interfaces.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::kind_testing {

/// An actor system that knows the message types of the runtime and of the registry's kinds.
class test_system {
 public:
  explicit test_system(const runtime::kind_registry& kinds) {
    cfg_.add_message_types<caf::id_block::milesrt_runtime>();
    kinds.register_types(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
  }
  caf::actor_system& sys() { return *sys_; }

 private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
};

/// A params struct of type P, to fill in and hand to a factory through setup().
template <class P>
class params_of {
 public:
  typename P::Builder operator*() { return root_; }
  typename P::Builder* operator->() { return &root_; }
  runtime::actor_setup setup(uint64_t run_seed = 1) {
    runtime::actor_setup s;
    s.name = "under_test";
    s.seed = run_seed;
    s.store = std::make_shared<runtime::process_store>();
    s.params_struct = capnp::toDynamic(root_.asReader());
    return s;
  }

 private:
  capnp::MallocMessageBuilder message_;
  typename P::Builder root_ = message_.initRoot<P>();
};

/// Sends a request and waits for its reply (or an error, or the deadline).
template <class Reply, class... Ts>
caf::expected<Reply> ask(caf::actor_system& sys, const caf::actor& a, Ts&&... xs) {
  caf::scoped_actor self{sys};
  caf::expected<Reply> out = caf::make_error(caf::sec::request_timeout);
  self->request(a, std::chrono::seconds(30), std::forward<Ts>(xs)...)
      .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

/// An envelope around one payload.
template <class T>
runtime::envelope wrap(T payload, uint64_t origin = 0, uint64_t min_version = 0,
                       uint64_t max_version = 0) {
  runtime::envelope e;
  e.origin = origin;
  e.min_version = min_version;
  e.max_version = max_version;
  e.payload = caf::make_message(std::move(payload));
  return e;
}

}  // namespace milesrt::kind_testing
