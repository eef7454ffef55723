# Parameters of the reward actor kinds `math_reward` and `remote_reward`, and of `group_filter`.
@0xc9e5a3b4d6f7082b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct MathRewardParams {
  correct @0 :Float64 = 1.0;
  wrong @1 :Float64 = 0.0;
  noAnswer @2 :Float64 = 0.0;
  # When no final answer can be extracted.
}

struct RemoteRewardParams {
  url @0 :Text;
  # http://host:port/path ; POST, JSON in and out.
  timeoutSeconds @1 :Float64 = 10;
  retries @2 :UInt32 = 2;
  # Further attempts after a timeout, a refused connection or a 5xx answer.
  backoffSeconds @3 :Float64 = 0.2;
  # The wait before the first retry; it doubles with each further one (at most 5 s).
}

struct GroupFilterParams {
  dynamicSampling @0 :Bool = true;
  # Drop groups whose rewards are all equal (they carry no GRPO signal).
}
