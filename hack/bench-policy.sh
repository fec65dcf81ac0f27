#!/usr/bin/env bash
# bench-policy.sh generates policies of growing size (hack/genpolicy) and
# prints, for each, the CPU time (user+system) and peak memory of
# `cue export` and of `gpupolicy vet`, `render` and `explain`, with each
# gpupolicy verb's CPU time as a ratio of cue export's.
#
# Usage: hack/bench-policy.sh [QUEUES...]        (default: 100 300 1000)
# Each size Q has Q/10 cohorts, Q/10 cards, Q/5 on-demand and Q/5
# always-on services and Q/10 templates (the issue's 1,000-queue policy:
# 100 cohorts, 100 cards, 200 + 200 services, 100 templates).
# RUNS=N runs each command N times and keeps the run with the least CPU
# time (default 1): on a shared machine the least is the nearest to the
# work itself.
# CUE=path picks the cue binary (default bin/cue if built, else
# cuelang.org/go/cmd/cue v0.17.1 built into out/bench/cue); GPUPOLICY=path the gpupolicy
# binary (default: built into out/bench/gpupolicy).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(100 300 1000)

mkdir -p out/bench
cue=${CUE:-}
if [[ -z $cue ]]; then
	if [[ -x bin/cue ]]; then cue=bin/cue; else
		# the module's own cuelang.org/go (v0.17.1), else the published one
		go build -o out/bench/cue cuelang.org/go/cmd/cue 2>/dev/null ||
			GOBIN=$PWD/out/bench go install cuelang.org/go/cmd/cue@v0.17.1
		cue=out/bench/cue
	fi
fi
gp=${GPUPOLICY:-}
if [[ -z $gp ]]; then
	# without kustomize's Go-plugin loader, as make build (Makefile's GO_TAGS)
	go build -tags kustomize_disable_go_plugin_support -o out/bench/gpupolicy ./cmd/gpupolicy
	gp=out/bench/gpupolicy
fi
# Measure copies of both binaries, written the same way: a freshly linked
# binary's page cache reads 10–20 MiB more resident than a cp of the same
# file, which would skew the memory column against whichever was just built.
cp "$cue" out/bench/cue.measured && cue=out/bench/cue.measured
cp "$gp" out/bench/gpupolicy.measured && gp=out/bench/gpupolicy.measured

# measure CMD...: prints "cpu_seconds max_rss_mib" of the run with the
# least CPU time of RUNS (exit 0 or 1 accepted). PREP, when set, is run
# (untimed) before each run.
measure() {
	local f i
	f=$(mktemp)
	for ((i = 0; i < ${RUNS:-1}; i++)); do
		[[ -z ${PREP:-} ]] || eval "$PREP"
		/usr/bin/time -f '%U %S %M' -o "$f" "$@" >/dev/null 2>&1 || { rc=$?; [[ $rc -le 1 ]] || { echo "failed ($rc): $*" >&2; cat "$f" >&2; exit 1; }; }
		tail -n 1 "$f" | awk '{printf "%.2f %.0f\n", $1 + $2, $3 / 1024}'
	done | sort -n | head -n 1
	rm -f "$f"
}

# render is measured twice into the folder of its previous render: as it
# is (a re-render that changes nothing writes nothing), and with one file
# of it changed before each run (a re-render after a policy change: every
# file checked, the unchanged ones linked, the folder swapped).
printf '%-7s %-16s %-22s %-22s %-22s %-22s\n' queues "cue export" "gpupolicy vet" "render, unchanged" "render, one changed" "gpupolicy explain"
printf '%-7s %-16s %-22s %-22s %-22s %-22s\n' "" "cpu s / MiB" "cpu s (×cue) / MiB" "cpu s (×cue) / MiB" "cpu s (×cue) / MiB" "cpu s (×cue) / MiB"
for q in "${sizes[@]}"; do
	dir=out/bench/q$q
	go run ./hack/genpolicy -queues "$q" -cohorts $((q / 10 > 0 ? q / 10 : 1)) -cards $((q / 10 > 0 ? q / 10 : 1)) \
		-ondemand $((q / 5)) -alwayson $((q / 5)) -templates $((q / 10 > 0 ? q / 10 : 1)) -out "$dir"
	read -r c cm < <(measure "$cue" export "./$dir")
	read -r v vm < <(measure "$gp" vet "$dir")
	out=out/bench/render-q$q
	"$gp" render "$dir" --out "$out" >/dev/null
	read -r r rm < <(measure "$gp" render "$dir" --out "$out")
	read -r rc rcm < <(PREP="printf '# changed\n' >>'$out/kustomization.yaml'" measure "$gp" render "$dir" --out "$out")
	read -r e em < <(measure "$gp" explain "$dir" -o json)
	ratio() { awk -v a="$1" -v b="$c" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }'; }
	printf '%-7s %-16s %-22s %-22s %-22s %-22s\n' "$q" "$c / $cm" \
		"$v ($(ratio "$v")×) / $vm" "$r ($(ratio "$r")×) / $rm" "$rc ($(ratio "$rc")×) / $rcm" "$e ($(ratio "$e")×) / $em"
done
