# The params of the actor kinds milesrt builds in: `ActorSpec.params` in graph.capnp is this
# struct, so a graph file writes `params = (<member> = (...))` and the Cap'n Proto compiler checks
# it against that kind's params struct.
#
# The built-in kinds own this file; graph.capnp imports it by name only. Each kind names its
# member in its descriptor (`kind_descriptor::params_member`), and validation checks that an
# actor's member is its kind's. `none` and `custom` are the two members the runtime itself knows:
# a kind's defaults, and the named values of kinds (plugins) that declare a parameter list.
# A new built-in kind with a params struct adds one member here.
@0xfa501b9877e2b367;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/param.capnp".Param;

struct Params {
  union {
    none @0 :Void;
    # The kind's defaults.
    custom @1 :List(Param);
    # Named typed values, checked against the parameter list the kind declares.
    rollout @2 :import "/milesrt/rollout.capnp".RolloutParams;
    trainer @3 :import "/milesrt/trainer.capnp".TrainerParams;
    publisher @4 :import "/milesrt/publisher.capnp".PublisherParams;
    data @5 :import "/milesrt/data.capnp".DataParams;
    mathReward @6 :import "/milesrt/reward.capnp".MathRewardParams;
    remoteReward @7 :import "/milesrt/reward.capnp".RemoteRewardParams;
    groupFilter @8 :import "/milesrt/reward.capnp".GroupFilterParams;
    reference @9 :import "/milesrt/reference.capnp".ReferenceParams;
    critic @10 :import "/milesrt/critic.capnp".CriticParams;
    trajectoryBuffer @11 :import "/milesrt/buffer.capnp".TrajectoryBufferParams;
    sessionServer @12 :import "/milesrt/session_server.capnp".SessionServerParams;
    environment @13 :import "/milesrt/environment.capnp".EnvironmentParams;
    teacher @14 :import "/milesrt/teacher.capnp".TeacherParams;
  }
}
