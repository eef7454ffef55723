# Parameters of the `critic` actor kind (a value model for PPO's gae estimator):
# `params = (critic = (...))`.
@0x8b4cd75a84538f72;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/device.capnp".Device;
using import "/milesrt/device.capnp".Dtype;

struct CriticParams {
  model @0 :Text;
  # A Hugging Face model folder: the critic is this decoder plus a value head Linear(hidden, 1),
  # read from value_head.safetensors in the folder when present, else initialised to zero.
  device @1 :Device = cpu;
  dtype @2 :Dtype = fp32;
  # fp32, or bf16 (bf16 weights with fp32 master weights and optimizer state).
  lr @3 :Float64 = 1e-5;
  weightDecay @4 :Float64 = 0.0;
  gradClip @5 :Float64 = 1.0;
  # Global grad-norm clip over decoder and value head; 0 = off.
  valueClip @6 :Float64 = 0.2;
  # New values are clipped to within valueClip of the values the samples carry; 0 = off.
  gamma @7 :Float64 = 1.0;
  lambda @8 :Float64 = 1.0;
  # The GAE recursion that gives the critic's returns (returns = advantages + values).
  trainBatch @9 :UInt32 = 1;
  # Groups per critic optimizer step: each training step's groups (those of the policy's batch that
  # reached "train") make ceil(n / trainBatch) optimizer steps.
}
