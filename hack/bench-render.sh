#!/usr/bin/env bash
# bench-render.sh measures gpupolicy against the stock tools it replaces, in
# CPU time (user + system) per run, side by side, and prints the ratios the
# issue's targets are stated in (<= 1.3x):
#
#   render:  gpupolicy render POLICY --out DIR
#            vs cue export POLICY + kustomize build DIR (of gpupolicy's render)
#   vet:     gpupolicy vet POLICY   vs   cue vet POLICY
#
# Usage: hack/bench-render.sh [RUNS] [POLICY_DIR]
#   RUNS        timed runs of each command (default 20), after a warm-up
#   POLICY_DIR  default ./policies/lab
# GPUPOLICY, CUE and KUSTOMIZE override the binaries (default bin/gpupolicy,
# bin/cue from `make cue`, bin/kustomize from
# `GOBIN=$PWD/bin go install sigs.k8s.io/kustomize/kustomize/v5@latest`).
set -euo pipefail

cd "$(dirname "$0")/.."
runs=${1:-20}
dir=${2:-./policies/lab}
gpupolicy=${GPUPOLICY:-bin/gpupolicy}
cue=${CUE:-bin/cue}
kustomize=${KUSTOMIZE:-bin/kustomize}

for b in "$gpupolicy" "$cue" "$kustomize"; do
	if [[ ! -x $b ]]; then
		echo "no $b: build it (see the header of $0) or set GPUPOLICY, CUE, KUSTOMIZE" >&2
		exit 2
	fi
done
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "RUNS must be a positive integer, got '$runs'" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/render

# cpu CMD...: the command's CPU seconds (user + sys), the median over RUNS
# runs (each command has been run once already, as a warm-up and a check).
TIMEFORMAT='%3U %3S'
cpu() {
	local samples=()
	for ((i = 0; i < runs; i++)); do
		{ time "$@" >/dev/null 2>&1; } 2>"$tmp/time" # TIMEFORMAT: "user sys", ms
		samples+=("$(awk '{ printf "%.3f", $1 + $2 }' "$tmp/time")")
	done
	printf '%s\n' "${samples[@]}" | sort -n | awk '{ t[NR] = $1 } END { print (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }'
}

# Warm-up, and every command must succeed.
"$gpupolicy" render "$dir" --out "$out" >/dev/null
"$cue" export "$dir" >/dev/null
"$kustomize" build "$out" >/dev/null
"$gpupolicy" vet "$dir" >/dev/null
"$cue" vet -c=false "$dir" >/dev/null

render=$(cpu "$gpupolicy" render "$dir" --out "$out")
export_=$(cpu "$cue" export "$dir")
build=$(cpu "$kustomize" build "$out")
vet=$(cpu "$gpupolicy" vet "$dir")
cuevet=$(cpu "$cue" vet -c=false "$dir")

awk -v runs="$runs" -v dir="$dir" -v r="$render" -v e="$export_" -v k="$build" -v v="$vet" -v cv="$cuevet" 'BEGIN {
	printf "CPU seconds (user+sys), median of %d runs, policy %s\n", runs, dir
	printf "  gpupolicy render            %.3f\n", r
	printf "  cue export + kustomize build %.3f (%.3f + %.3f)\n", e + k, e, k
	printf "  ratio                       %.2fx (target <= 1.3x)\n", (e + k > 0) ? r / (e + k) : 0
	printf "  gpupolicy vet               %.3f\n", v
	printf "  cue vet                     %.3f\n", cv
	printf "  ratio                       %.2fx (target <= 1.3x)\n", (cv > 0) ? v / cv : 0
}'
