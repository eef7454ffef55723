# Parameters of the `session_server` actor kind: an OpenAI-compatible, token-in-token-out HTTP
# server of agent sessions (docs/sessions.md). It samples through the rollout actor its
# `generate` port is joined to, and its items are the groups of sessions that ended.
@0xe2b7c4d91a3f5608;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct SessionServerParams {
  model @0 :Text;
  # The model folder whose tokenizer.json (and chat template) the sessions use: the rollout's.
  chatTemplate @1 :Text;
  # A .jinja file; empty: the model's own template.
  address @2 :Text = "127.0.0.1";
  # The address to listen on (an IP literal). Another than loopback needs bearerToken.
  port @3 :UInt16 = 0;
  # 0: a free port. The server's URL is written to RUN_DIR/<actor name>.json either way.
  bearerToken @4 :Text;
  # When set, every request must carry `Authorization: Bearer <token>` (else 401).
  maxOpenSessions @5 :UInt32 = 1024;
  # Opening another is answered 429.
  idleTimeoutSeconds @6 :Float64 = 600;
  # A session with no request for this long is dropped (not trained) and counted.
  groupTimeoutSeconds @7 :Float64 = 600;
  # After a group's first session ended, how long it waits for the others.
  partialGroups @8 :Bool = true;
  # When that wait runs out: train on the ended sessions (true) or drop the group (false).
  maxTokens @9 :UInt32 = 0;
  # A session's token limit (its sequence, the reply's room included); 0: none.
  maxNewTokens @10 :UInt32 = 256;
  # A turn's tokens when the request gives no max_tokens (and the most it may ask for).
  bodyLimit @11 :UInt32 = 1048576;
  # The largest request body (413 past it).
  retryAfterSeconds @12 :Float64 = 1;
  # The Retry-After of a 429 while the schedule admits no new group (the header carries whole
  # seconds: this, rounded up, at least 1).
  modelName @13 :Text = "milesrt";
  # The name GET /models lists and answers carry.
  scoreUnrewarded @14 :Bool = false;
  # True: a group with a session ended without a reward goes out on the `unscored` port, for the
  # graph's reward actor to score (every session of it, against the sessions' metadata.label);
  # false: such a session trains with reward 0.
  temperature @15 :Float64 = 1.0;
  # The temperature every turn is sampled at: the trainer's (the graph refuses another). A
  # request naming another temperature is answered 400: the trainer would score its tokens at
  # the graph's temperature, and train on log-probs that are not the policy's.
}
