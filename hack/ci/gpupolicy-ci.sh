#!/usr/bin/env bash
# gpupolicy-ci.sh is the shell part of the gpupolicy GitHub Action
# (action.yml at the repository root): the checks a pull request that
# changes GPU policy runs, with their reports written to one directory.
# It runs the same anywhere (any CI, a laptop); tested by
# cmd/gpupolicy/testdata/script/ci_action.txtar on a temporary repository.
#
#   1. gpupolicy vet POLICY           -> OUT/sarif/vet.sarif (+ annotations)
#   2. gpupolicy render --env ENV --check, for each ENV in ENVIRONMENTS
#   3. gpupolicy plan --base BASE     -> OUT/plan.md (the PR comment),
#                                        OUT/sarif/plan.sarif (+ annotations),
#                                        none of them when plan exits 2
#
# Settings (environment variables):
#   GPUPOLICY     the gpupolicy binary (default: gpupolicy on PATH)
#   POLICY        the policy directory (default policies/lab)
#   ENVIRONMENTS  environments whose deploy/ENV render --check checks,
#                 space-separated (default: none)
#   BASE          the revision plan compares with, e.g. origin/main
#                 (default: none, plan is skipped)
#   FETCH_BASE    when "true", `git fetch origin BRANCH` first, for BASE
#                 origin/BRANCH (a shallow checkout lacks it)
#   OUT           the reports' directory (default gpupolicy-reports)
#   ANNOTATE      when "true" (default), also print vet's and plan's
#                 findings as GitHub workflow-command annotations
#   DEFER_EXIT    when "true", exit 0 and leave the status in OUT/status
#                 and $GITHUB_OUTPUT (status=N), so the steps that post the
#                 comment and upload SARIF still run; the action's last step
#                 exits with it
#
# Exit status: the worst of the checks': 0 clean, 1 findings (a stale
# render, a change that adds an error finding), 2 input error (a policy that
# does not vet, a bad revision).
set -uo pipefail

gpupolicy=${GPUPOLICY:-gpupolicy}
policy=${POLICY:-policies/lab}
environments=${ENVIRONMENTS:-}
base=${BASE:-}
out=${OUT:-gpupolicy-reports}
annotate=${ANNOTATE:-true}

status=0
# worst records a check's exit status: 2 beats 1 beats 0.
worst() {
	local rc=$1
	if ((rc > 2)); then rc=2; fi
	if ((rc > status)); then status=$rc; fi
}

mkdir -p "$out/sarif"

echo "::group::gpupolicy vet $policy"
"$gpupolicy" vet "$policy"
vet=$?
worst $vet
"$gpupolicy" vet "$policy" -o sarif >"$out/sarif/vet.sarif"
if [[ $annotate == true ]]; then
	"$gpupolicy" vet "$policy" -o github
fi
echo "::endgroup::"

for env in $environments; do
	echo "::group::gpupolicy render --env $env --check"
	"$gpupolicy" render --env "$env" --check
	worst $?
	echo "::endgroup::"
done

if [[ -n $base ]]; then
	echo "::group::gpupolicy plan --base $base $policy"
	if [[ ${FETCH_BASE:-} == true && $base == origin/* ]]; then
		git fetch --no-tags origin "+refs/heads/${base#origin/}:refs/remotes/$base" || worst 2
	fi
	{
		echo "<!-- gpupolicy-plan -->"
		"$gpupolicy" plan --base "$base" "$policy"
	} >"$out/plan.md"
	plan=$? # the group's status is its last command's: plan's
	worst $plan
	if ((plan > 1)); then
		# No plan to post: the reason is in the log. A head that does not
		# vet is vet's report (vet.sarif, its annotations); plan's SARIF
		# and annotations would repeat it.
		rm -f "$out/plan.md" "$out/sarif/plan.sarif"
	else
		"$gpupolicy" plan --base "$base" "$policy" -o sarif >"$out/sarif/plan.sarif"
		if [[ $annotate == true ]]; then
			"$gpupolicy" plan --base "$base" "$policy" -o github
		fi
	fi
	echo "::endgroup::"
fi

# An empty SARIF file (a verb that failed before printing) is not a log.
for f in "$out"/sarif/*.sarif; do
	[[ -s $f ]] || rm -f "$f"
done

echo "$status" >"$out/status"
if [[ -n ${GITHUB_OUTPUT:-} ]]; then
	{
		echo "status=$status"
		echo "sarif=$out/sarif"
		if [[ -f $out/plan.md ]]; then echo "plan=$out/plan.md"; fi
	} >>"$GITHUB_OUTPUT"
fi
echo "gpupolicy checks: exit status $status"
if [[ ${DEFER_EXIT:-} == true ]]; then
	exit 0
fi
exit "$status"
