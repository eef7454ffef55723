# Parameters of the `teacher` actor kind (on-policy distillation: a frozen teacher model that sets
# each sample's teacher log-probs, for the trainer's distillation term): `params = (teacher = (...))`.
# The teacher is a local model folder (`model`) or a remote server (`url`), one of the two.
@0xb8e3d2a4f1c65790;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/device.capnp".Device;
using import "/milesrt/device.capnp".Dtype;

struct TeacherParams {
  model @0 :Text;
  # A local teacher: its Hugging Face model folder, scored by a batched prefill of each group on
  # `device` in this process. Empty with `url`.
  url @1 :Text;
  # A remote teacher: the base URL (http://host:port) of a server that speaks the teacher protocol
  # (docs/kinds.md#teacher; examples/teacher_server). Empty with `model`.
  student @2 :Text;
  # The student's model folder (usually the rollout's): the teacher's tokenizer must equal its
  # tokenizer (vocabulary, special ids and named special tokens), else the teacher refuses to
  # start, naming the first difference.
  device @3 :Device = cpu;
  dtype @4 :Dtype = fp32;
  # Of a local teacher: fp32 or bf16.
  temperature @5 :Float64 = 1.0;
  # Must match the trainer's temperature: the log-probs are taken at it, over the full vocabulary.
  timeoutSeconds @6 :Float64 = 60;
  # A remote teacher: per attempt of one group's request.
  retries @7 :UInt32 = 2;
  # A remote teacher: further attempts after a timeout, a refused connection or a 5xx answer.
}
