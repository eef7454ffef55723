# A named typed value: the parameters of kinds that declare their own list (`custom = [...]`).
# The runtime owns it (its C++ reads and writes these lists); kinds.capnp imports it for `custom`.
@0xe6dc0612f9f3415f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct Param {
  name @0 :Text;
  value :union {
    bool @1 :Bool;
    int @2 :Int64;
    float @3 :Float64;
    text @4 :Text;
  }
}
