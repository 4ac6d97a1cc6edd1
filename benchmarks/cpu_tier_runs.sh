#!/usr/bin/env bash
# Every CPU tier, a few seeds each, with its defaults (`trainclock run TIER --seed S`), into one
# results store: what `trainclock plan --validate --db STORE` judges this machine's plans on.
# Run it with nothing else on the machine: a run slowed by other work is a wrong calibration point.
#
#   benchmarks/cpu_tier_runs.sh STORE.db OUT_DIR [SEEDS]      e.g. /tmp/quiet.db /tmp/quiet "201 202 203"
#   .venv/bin/trainclock plan --validate --db STORE.db
set -euo pipefail
store=${1:?give the results store, e.g. /tmp/quiet.db}
out=${2:?give the result tree folder, e.g. /tmp/quiet}
seeds=${3:-"201 202 203"}
trainclock=${TRAINCLOCK:-$(dirname "$0")/../.venv/bin/trainclock}
# every registered benchmark's CPU tiers (members named <benchmark>-tiny and -mini), tiny ones first
tiers=$("$trainclock" list --names | grep -E -- '-tiny$'; "$trainclock" list --names | grep -E -- '-mini$')
for tier in $tiers; do
  "$trainclock" data prepare "$tier" > /dev/null  # untimed, cached
done
# seed by seed, every tier in turn: the machine's speed drifts over an hour (a shared host), and
# this spreads the drift over every tier instead of handing one tier a slow spell
for seed in $seeds; do
  for tier in $tiers; do
    echo "$(date +%T) $tier seed $seed, load $(cut -d' ' -f1 /proc/loadavg)"
    "$trainclock" run "$tier" --seed "$seed" --out "$out" --db "$store" --no-progress | grep -E "run (success|aborted)" || true
  done
done
