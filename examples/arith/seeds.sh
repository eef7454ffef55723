#!/usr/bin/env bash
# The arithmetic example (run.sh, both schedules) once per seed, then the table of gains over the
# SFT plateau and the rule the main job promises on any machine: every seed gains >= 20 held-out
# points in both schedules, and the median gain is >= 25 in each. Exits non-zero when it does not.
#   examples/arith/seeds.sh [seed...]     default 1 2 3
# Each seed's log: runs/arith-seeds/seed-S.log; results: runs/arith-seeds/results.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
out=runs/arith-seeds
mkdir -p $out
: > $out/results.txt
for s in "${seeds[@]}"; do
  start=$(date +%s)
  MILESRT_ARITH_SEED=$s examples/arith/run.sh both > "$out/seed-$s.log" 2>&1
  elapsed=$(( $(date +%s) - start ))
  if [ ! -f runs/arith/results.txt ] || [ "$(wc -l < runs/arith/results.txt)" -ne 2 ]; then
    echo "seed $s: the example did not finish (see $out/seed-$s.log)"; exit 1
  fi
  while read -r graph sft acc; do echo "$s $graph $sft $acc $elapsed" >> $out/results.txt; done < runs/arith/results.txt
  grep VERDICT "$out/seed-$s.log" | sed "s/^/seed $s: /"
done
awk '
  { gain[$2] = gain[$2] " " ($4 - $3) * 100; printf "seed %s %-11s SFT %.1f%% -> GRPO %.1f%% (%+.1f points) %d s\n", $1, $2, $3 * 100, $4 * 100, ($4 - $3) * 100, $5 }
  END {
    bad = 0
    for (g in gain) {
      n = split(substr(gain[g], 2), v, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      printf "%-11s over %d seeds: min %+.1f, median %+.1f points\n", g, n, v[1], med
      if (v[1] < 20 || med < 25) { bad = 1; printf "  short of the rule (min >= 20, median >= 25)\n" }
    }
    print (bad ? "SEEDS VERDICT: FAIL" : "SEEDS VERDICT: PASS")
    exit bad
  }' $out/results.txt
