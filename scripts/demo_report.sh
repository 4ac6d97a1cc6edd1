#!/usr/bin/env bash
# The report demo: the real MLPerf results of ../shared next to a local trainclock run and a planner
# curve, in one self-contained HTML file. Uses its own database inside OUT, so it leaves the user's
# results store alone.
#
#   scripts/demo_report.sh [OUT] [RUNS]   OUT: default demo-report; RUNS: the --out of an earlier
#                                         `trainclock run` (default: a fresh gpt3-tiny run, about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-demo-report}")
runs=${2:-"$out/runs"}
tc=.venv/bin/trainclock
db="sqlite:///$out/results.db"
mkdir -p "$out"
"$tc" results import ../shared/mlperf-results --db "$db"
if [[ -z "${2:-}" ]]; then
  "$tc" run gpt3-tiny --seed 11 --out "$runs" --db "$db" --no-progress || [[ $? -eq 1 ]]  # 1: stopped at a limit
else
  "$tc" results import "$runs" --db "$db"
fi
"$tc" plan gpt3-175b --accelerator h100-sxm --stack h100-sxm/v3.0 --gbs 2688 --sweep 512,768,1536,3584,10752 \
  --price 37000/node-month --save "$out/plan-h100-v3.0.json"
"$tc" report --db "$db" --runs "$runs" --plan "$out/plan-h100-v3.0.json" --out "$out"
