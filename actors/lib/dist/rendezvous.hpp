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

/// "rank 1 of 2 (store 127.0.0.1:29500)": how errors name a rank of a group.
std::string describe_rank(const group_options& o);

}  // namespace milesrt::dist
