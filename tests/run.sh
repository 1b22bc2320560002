#!/bin/bash
# Run the C unit tests given as arguments and every bats suite, then print one
# line "check: N passed, N failed, N skipped". Exits non-zero on any failure.
# WB_BUILD is the build folder; BATS_FILTER (a regex) picks bats suites by name.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export WB_BUILD=${WB_BUILD:-$here/../build}
export WB_ROOT=$(cd "$here/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
for t in "$@"; do
	echo "# unit: $(basename "$t")"
	out=$(mktemp)
	"$t" | tee "$out"
	rc=${PIPESTATUS[0]}
	cat "$out" >>"$log"
	# A crash or a non-zero exit counts as a failure even when every line printed was ok.
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$out" | head -n 1)
	ran=$(grep -cE '^(ok|not ok) [0-9]+' "$out")
	if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$out"; then
		echo "not ok $((ran + 1)) - $(basename "$t") exited with status $rc after $ran of ${planned:-?} tests" | tee -a "$log"
	elif [ -n "$planned" ] && [ "$ran" -lt "$planned" ]; then
		echo "not ok $((ran + 1)) - $(basename "$t") ran $ran of $planned tests" | tee -a "$log"
	fi
	rm -f "$out"
	[ "$rc" -eq 0 ] || status=1
done

suites=()
for f in "$here"/bats/*.bats; do
	[ -e "$f" ] || continue
	if [ -n "${BATS_FILTER:-}" ] && ! [[ $(basename "$f") =~ $BATS_FILTER ]]; then continue; fi
	suites+=("$f")
done
if [ ${#suites[@]} -gt 0 ]; then
	echo "# bats: ${#suites[@]} suites"
	bats --tap "${suites[@]}" | tee -a "$log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

skipped=$(grep -cE '^ok [0-9]+.*# (skip|SKIP)' "$log")
passed=$(( $(grep -cE '^ok [0-9]+' "$log") - skipped ))
failed=$(grep -cE '^not ok [0-9]+' "$log")
[ "$failed" -eq 0 ] || status=1
echo "check: $passed passed, $failed failed, $skipped skipped"
exit $status
