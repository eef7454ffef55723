#pragma once
/// The fields the built-in kinds' schemas renamed or removed: a graph file that names one is
/// refused with "field X was renamed Y", and `milesrt upgrade FILE` rewrites the renamed ones.

#include <vector>

#include "runtime/graph/loader.hpp"

namespace milesrt::app {

/// The one rename table (schema_renames.cpp); an entry stays for as long as old graph files may be
/// around.
const std::vector<graph::renamed_field>& schema_renames();

}  // namespace milesrt::app
