# Where a kind's model lives and in which precision: enums shared by the kinds' params structs
# (rollout, trainer, reference, critic).
@0xb5f1756ab9d70b3f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

enum Device {
  cpu @0;
  cuda @1;
}

enum Dtype {
  fp32 @0;
  bf16 @1;
  # bf16 weights (a trainer or critic keeps fp32 master weights and optimizer state).
}
