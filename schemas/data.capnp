# Parameters of the `data` actor kind: prompts from a JSONL dataset.
@0xb8d4f2a3c5e6071a;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct DataParams {
  path @0 :Text;
  # A JSONL file, one object per line; relative paths are taken from the working directory.
  promptKey @1 :Text = "prompt";
  labelKey @2 :Text = "label";
  messagesKey @3 :Text = "messages";
  # Optional: a chat (array of {role, content}) used instead of the prompt text.
  responseKey @4 :Text = "response";
  # Optional: the target completion (SFT).
  shuffle @5 :Bool = true;
  seed @6 :UInt64 = 0;
  epochs @7 :UInt32 = 1;
  # Passes over the data; 0 = without end.
  asChat @8 :Bool = false;
  # Wrap the prompt text as one user message (rendered with the rollout's chat template).
  promptIdsKey @9 :Text = "prompt_ids";
  # Optional: the prompt as an array of token ids, sent to the rollout as they are (no tokenizer
  # needed); a record needs this key, the prompt key or the messages key.
}
