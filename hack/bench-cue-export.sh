#!/usr/bin/env bash
# bench-cue-export.sh times the stock `cue export` of a policy, a process per
# run, for comparison with gpupolicy's in-process load and render
# (go test -run '^$' -bench . ./render/: BenchmarkLoad, BenchmarkRenderOnly,
# BenchmarkRender).
#
# Usage: hack/bench-cue-export.sh [RUNS] [POLICY_DIR]
#   RUNS        number of timed runs (default 20), after one untimed warm-up
#   POLICY_DIR  default ./policies/lab
# CUE=path overrides the cue binary (default bin/cue, from `make cue`).
set -euo pipefail

cd "$(dirname "$0")/.."
runs=${1:-20}
dir=${2:-./policies/lab}
cue=${CUE:-bin/cue}

if [[ ! -x $cue ]]; then
	echo "no $cue: run 'make cue' first, or set CUE=/path/to/cue" >&2
	exit 2
fi
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "RUNS must be a positive integer, got '$runs'" >&2
	exit 2
fi

"$cue" export "$dir" >/dev/null # warm-up: page cache, and a failure shows here

times=()
for ((i = 0; i < runs; i++)); do
	start=$(date +%s%N)
	"$cue" export "$dir" >/dev/null
	end=$(date +%s%N)
	times+=($(((end - start) / 1000))) # microseconds
done

printf '%s\n' "${times[@]}" | sort -n | awk -v runs="$runs" -v cmd="$cue export $dir" -v ver="$("$cue" version 2>/dev/null | head -1)" '
	{ t[NR] = $1; sum += $1 }
	END {
		median = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%s (%s), %d runs, wall time per run:\n", cmd, ver, runs
		printf "  min %.1f ms   median %.1f ms   mean %.1f ms   max %.1f ms\n", t[1] / 1000, median / 1000, sum / NR / 1000, t[NR] / 1000
	}'
