#!/bin/bash
# Run the C unit tests given as arguments and every bats suite, then print one
# line "check: N passed, N failed, N skipped". Exits non-zero on any failure.
# WB_BUILD is the build folder; BATS_FILTER (a regex) picks bats suites by name;
# WB_JOBS is how many suites run at once (GNU parallel; 1 runs them one by one).
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

# Suites that share something machine-wide run alone, after the others: a fixed port or
# make run's stages (system_make_run), systemd and network namespaces (systemd_*,
# security_*: also a group added to /etc/group), a CPU-heavy workload whose watts or CPU
# time are measured (system_e2e, usaged_cpu_accuracy, usaged_modes_agree). The rest run
# WB_JOBS suites at a time (default: 3 per CPU; they mostly wait on their daemons).
serial_re='^(system_make_run|system_e2e|systemd_.*|security_.*|k8s_pod_play|vm_.*|system_model_server|usaged_cpu_accuracy|usaged_modes_agree)\.bats$'
parallel=() serial=()
for f in "$here"/bats/*.bats; do
	[ -e "$f" ] || continue
	name=$(basename "$f")
	if [ -n "${BATS_FILTER:-}" ] && ! [[ $name =~ $BATS_FILTER ]]; then continue; fi
	if [[ $name =~ $serial_re ]]; then serial+=("$f"); else parallel+=("$f"); fi
done
jobs=${WB_JOBS:-$((3 * $(nproc)))}
if [ ${#parallel[@]} -gt 0 ]; then
	echo "# bats: ${#parallel[@]} suites, $jobs at a time"
	if [ "$jobs" -gt 1 ] && command -v parallel >/dev/null; then
		bats --tap --jobs "$jobs" --no-parallelize-within-files "${parallel[@]}" | tee -a "$log"
	else
		bats --tap "${parallel[@]}" | tee -a "$log"
	fi
	[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if [ ${#serial[@]} -gt 0 ]; then
	echo "# bats: ${#serial[@]} suites one at a time"
	bats --tap "${serial[@]}" | tee -a "$log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

skipped=$(grep -cE '^ok [0-9]+.*# (skip|SKIP)' "$log")
passed=$(( $(grep -cE '^ok [0-9]+' "$log") - skipped ))
failed=$(grep -cE '^not ok [0-9]+' "$log")
[ "$failed" -eq 0 ] || status=1
echo "check: $passed passed, $failed failed, $skipped skipped"
exit $status
