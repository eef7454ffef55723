# Parameters of the `reference` actor kind (a frozen reference model that sets each sample's
# ref_logprobs, for the trainer's KL terms): `params = (reference = (...))`.
@0xc31c6c5cec97b685;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/device.capnp".Device;
using import "/milesrt/device.capnp".Dtype;

struct ReferenceParams {
  model @0 :Text;
  # The Hugging Face model folder of the reference policy (usually the model training starts from).
  device @1 :Device = cpu;
  dtype @2 :Dtype = fp32;
  # fp32 or bf16.
  temperature @3 :Float64 = 1.0;
  # Must match the trainer's temperature: the log-probs are taken at it, over the full vocabulary.
}
