#pragma once
/// How the ranks of a group meet: rank 0 serves a c10d TCP store on group_options' host and port,
/// the others connect to it, and each rank announces itself; rendezvous() returns once every rank
/// has, or fails with an error that names the ranks that did not join in time (or the port that
/// rank 0 could not listen on). The collective backends then exchange their addresses through
/// the store.

#include <c10/util/intrusive_ptr.h>

#include <caf/expected.hpp>

#include "actors/lib/dist/collectives.hpp"

namespace c10d {
class Store;
}

namespace milesrt::dist {

/// Opens (rank 0) or joins the group's store and waits until every rank has joined it.
caf::expected<c10::intrusive_ptr<c10d::Store>> rendezvous(const group_options& o);

/// A TCP port on `host` (an IPv4 address) that was free a moment ago: the kernel's pick for port
/// 0; 0 when none could be had.
uint16_t pick_free_port(const std::string& host = "127.0.0.1");

/// Whether something listens on (or holds) `port` of `host` now: a bind to it fails with
/// EADDRINUSE.
bool port_in_use(const std::string& host, uint16_t port);

/// "rank 1 of 2 (store 127.0.0.1:29500)": how errors name a rank of a group.
std::string describe_rank(const group_options& o);

}  // namespace milesrt::dist
