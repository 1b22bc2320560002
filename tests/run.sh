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
	"$t" | tee -a "$log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
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
