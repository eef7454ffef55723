#!/usr/bin/env bash
# The calculator-agent example end to end (issue 30, example a): multi-turn arithmetic with a
# calculator tool, trained with GRPO on episodes the `environment` kind runs inside the graph.
#   1. milesrt_agent_calc_make writes a small model, its toy tokenizer (characters, with the tool
#      call's two halves as tokens) and chat template, and the data: 2-digit products ("37*86"),
#      which a model this small cannot compute unaided, but can by calling `calculate`;
#   2. examples/agent_calc/sft.capnp warm-starts it on a teacher's turns: the teacher calls the
#      tool in only 30% of the episodes that offer it and answers from memory otherwise;
#   3. graphs/agent_env.capnp trains it with GRPO on calculator episodes (reward 1 for the right
#      product); the environment evaluates the held-out tasks (sampled at temperature 1, as in
#      training) under version 0 (the SFT start) and every 10 versions, with the tool and, beside
#      it, without it.
# Prints held-out success, the tool-call rate and tool-call success before and after, and the
# same task without the tool. Usage: examples/agent_calc/run.sh   (MILESRT_BUILD: build folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${MILESRT_BUILD:-build}
milesrt=./$build/milesrt
start=$(date +%s)

echo "== 1. model, tokenizer, chat template and data (runs/agent_calc/setup)"
rm -rf runs/agent_calc
"./$build/milesrt_agent_calc_make" --out runs/agent_calc/setup

echo "== 2. SFT warm start on the teacher's turns (examples/agent_calc/sft.capnp)"
$milesrt run examples/agent_calc/sft.capnp ${MILESRT_AGENT_SFT_ARGS:-}

echo "== 3. GRPO on calculator episodes (graphs/agent_env.capnp)"
$milesrt run graphs/agent_env.capnp ${MILESRT_AGENT_GRPO_ARGS:-}
elapsed=$(( $(date +%s) - start ))

# A metric of the first (`head`) or last (`tail`) step that reported it (metrics.jsonl).
metric() {
  grep -o "\"$1\": *[-0-9.e+]*" runs/agent_calc/grpo/metrics.jsonl | "$2" -n 1 | sed 's/.*: *//'
}
pct() { awk -v a="${1:-0}" 'BEGIN { printf "%5.1f%%", a * 100 }'; }
# A step's record carries the version after it; its evaluation sampled under the one before.
version_of_last_eval=$(grep '"eval_env_success"' runs/agent_calc/grpo/metrics.jsonl | tail -n 1 |
  grep -o '"version": *[0-9]*' | sed 's/.*: *//')
echo "== held-out tasks ($(wc -l < runs/agent_calc/setup/heldout.jsonl)), sampled at temperature 1:" \
  "SFT start -> after GRPO (the model after $((${version_of_last_eval:-1} - 1)) steps)"
for row in "success with the tool:eval_env_success" "tool-call rate:eval_env_tool_call_rate" \
           "tool-call success:eval_env_tool_call_success" "success without the tool:eval_env_alt_success"; do
  name=${row%%:*} key=${row#*:}
  printf "   %-26s %s -> %s\n" "$name" "$(pct "$(metric "$key" head)")" "$(pct "$(metric "$key" tail)")"
done
before=$(metric eval_env_success head) after=$(metric eval_env_success tail)
rate=$(metric eval_env_tool_call_rate tail)
echo "== calculator-agent example done in $elapsed s"
# The verdict: at least 20 held-out points over the SFT start, the tool called in at least half of
# the episodes, within 10 minutes (600 s).
awk -v b="$before" -v a="$after" -v r="$rate" -v t="$elapsed" 'BEGIN {
  gain = (a - b) * 100; why = ""
  if (gain < 20) why = why sprintf(" gained %.1f < 20 points;", gain)
  if (r < 0.5) why = why sprintf(" tool-call rate %.1f%% < 50%%;", r * 100)
  if (t > 600) why = why sprintf(" took %d s > 600 s;", t)
  if (why != "") { printf "VERDICT: FAIL:%s\n", why; exit 1 }
  printf "VERDICT: PASS: %+.1f points, tool called in %.1f%% of episodes, %d s\n", gain, r * 100, t
}'
