#!/usr/bin/env bats
# procfs mode end to end over a fake /proc (no root needed): cumulative values
# from the first scan, new and exited processes, comm cleaning, cgroup identity
# from a fake cgroup2 mount, and a broken /proc/stat counted without a crash.
load helper
load usaged_helper

CID=3f1e2d4c5b6a79880716253443526170819203a4b5c6d7e8f90a1b2c3d4e5f60
TAIL=" S 1 1 1 0 -1 4194304 0 0 0 0 %d %d 0 0 20 0 1 0 %d 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0"

setup() {
	P=$BATS_TEST_TMPDIR/proc
	mkdir -p "$P/self" "$BATS_TEST_TMPDIR/cg2/system.slice/docker-$CID.scope"
	echo "30 1 0:26 / $BATS_TEST_TMPDIR/cg2 rw shared:1 - cgroup2 cgroup2 rw" >"$P/self/mountinfo"
	echo "cpu  100 0 50 1000 0 0 0 0 0 0" >"$P/stat"
	TICK=$((1000000000 / $(getconf CLK_TCK)))
}

teardown() {
	wb_kill_all
}

# fake_proc PID COMM UTIME STIME [START]: written whole, never in place, so that a scan never
# reads a file half written (an empty stat reads as a process gone). A new process's directory
# is made aside and renamed into place with its files: a scan sees all of it or none of it.
fake_proc() {
	local d=$P/$1
	if [ ! -d "$d" ]; then
		mkdir -p "$P/.new.$1"
		echo "0::/" >"$P/.new.$1/cgroup"
		printf "%d (%s)$TAIL\n" "$1" "$2" "$3" "$4" "${5:-500}" >"$P/.new.$1/stat"
		mv -T "$P/.new.$1" "$d"
		return
	fi
	wb_put "$d/stat" "$(printf "%d (%s)$TAIL" "$1" "$2" "$3" "$4" "${5:-500}")"
}

# last_json PID: the last listing of PID as JSON
last_json() {
	python3 - "$(usaged_tapfile u)" "$1" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    if line.startswith("{") and line.endswith("\n"):  # not a line being written
        m = json.loads(line)["msg"]
        for p in m.get("procs", []):
            if p["pid"] == int(sys.argv[2]):
                last = p
print(json.dumps(last, sort_keys=True) if last else "none")
PY
}

listed_cpu() {
	[ "$($TAPQ "$(usaged_tapfile u)" cpu "$1")" = "$2" ]
}

# tap_lines: the tap's whole lines so far (not one it is still writing)
tap_lines() {
	local f
	f=$(usaged_tapfile u)
	[ -f "$f" ] || return 0
	head -n "$(wc -l <"$f")" "$f"
}

# usages: usage messages in the tap so far; usage_after N: wait until there are more than N
usages() {
	tap_lines | grep -c '"kind":"usage"' || true
}
usages_over() {
	[ "$(usages)" -gt "$1" ]
}
usage_after() {
	wb_wait_for 30 usages_over "$1"
}

# exited_listings PID: how many messages list PID as exited
exited_listings() {
	python3 - "$(usaged_tapfile u)" "$1" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    if line.startswith("{") and line.endswith("\n"):  # not a line being written
        n += sum(1 for p in json.loads(line)["msg"].get("procs", []) if p["pid"] == int(sys.argv[2]) and p.get("exited"))
print(n)
PY
}
exited_seen() {
	[ "$(exited_listings "$1")" -ge 1 ]
}

@test "procfs over a fake /proc: counts from the first scan, new and exited processes, identity" {
	fake_proc 10 worker 100 20
	wb_put "$P/10/cgroup" "0::/system.slice/docker-$CID.scope"
	fake_proc 11 idle 5 5
	usaged_start u --mode procfs --proc_root "$P" --interval 200ms --retire_after 2 --full_every 1000
	usaged_tap u 3600 usage/ stat/
	usage_after 1 # the first scan and the one after it
	# nothing ran since the first scan: nothing listed
	run grep -c '"pid":1[01],' "$(usaged_tapfile u)"
	assert_output 0

	fake_proc 10 worker 130 40 # +50 ticks
	wb_wait_for 3 listed_cpu 10 $((50 * TICK))
	run $TAPQ "$(usaged_tapfile u)" cgroup 10
	assert_output --partial "\"container_id\": \"$CID\""
	assert_output --partial "\"runtime\": \"docker\""
	assert_output --partial "\"id\": $(stat -c %i "$BATS_TEST_TMPDIR/cg2/system.slice/docker-$CID.scope"),"

	# a process that started after the first scan: all of its time counts; its comm is cleaned
	fake_proc 12 $'bad\xffname' 3 4 900
	wb_wait_for 3 listed_cpu 12 $((7 * TICK))
	run last_json 12
	assert_output --partial '"comm": "bad?name"'
	assert_output --partial "\"start_ns\": $((900 * TICK))"

	# it exits: listed once more as exited, with its final values, then never again
	mv -T "$P/12" "$P/.gone.12" # at once, as a process exits
	rm -r "$P/.gone.12"
	wb_wait_for 30 exited_seen 12
	usage_after $(($(usages) + 2)) # and three more messages: never again
	run python3 -c "
import json
n = 0
for l in open('$(usaged_tapfile u)'):
    if l.startswith('{') and l.endswith('\n'):
        for p in json.loads(l)['msg'].get('procs', []):
            if p['pid'] == 12 and p.get('exited'):
                n += 1
                assert p['cpu_ns'] == $((7 * TICK)), p
print(n)"
	assert_output 1
	# pid 10, idle since: listed for retire_after messages, then no longer
	run tail -n 3 "$(usaged_tapfile u)"
	refute_output --partial '"pid":10,'
	run $TAPQ "$(usaged_tapfile u)" check
	assert_success
}

@test "procfs over a fake /proc: a broken /proc/stat is counted and logged, usaged goes on" {
	fake_proc 10 worker 100 20
	usaged_start u --mode procfs --proc_root "$P" --interval 200ms
	usaged_tap u 3600 usage/ stat/
	usage_after 0
	wb_put "$P/stat" "garbage"
	wb_wait_for 30 grep -q "stat: no \"cpu\" line" "$BATS_TEST_TMPDIR/u.log"
	wb_wait_for 30 bash -c '[ "$($0 "$1" stat proc_stat_errors)" -ge 3 ]' "$TAPQ" "$(usaged_tapfile u)"
	n=$(usages)
	wb_put "$P/stat" "cpu  200 0 60 2000 0 0 0 0 0 0"
	usage_after "$n"
	kill -0 "$PID_u"
	# what came after carries the node totals as read, since the first reading (user 100)
	run tail -n 1 <(tap_lines | grep '"kind":"usage"')
	assert_output --partial "\"user_ns\":$((100 * TICK))"
}

# big_totals TAP TICK: every node total in TAP within the schema's bound, the last one the
# change from the first reading (+30 user, +2 system, +400 idle ticks). Python, not jq: jq 1.6
# rounds big integers.
big_totals() {
	python3 - "$1" "$2" <<'PY'
import json, sys
tick = int(sys.argv[2])
last = None
for line in open(sys.argv[1]):
    if line.startswith("{") and line.endswith("\n"):  # not a line being written
        m = json.loads(line)["msg"]
        if "cpu" in m:
            for k, v in m["cpu"].items():
                assert 0 <= v <= 2**63 - 1, (k, v)
            last = m["cpu"]
assert last is not None
assert last["idle_ns"] == 400 * tick, last
assert last["user_ns"] == 30 * tick and last["system_ns"] == 2 * tick, last
print("ok")
PY
}

@test "procfs over a fake /proc: node totals of a big host stay within the schema's bound" {
	# 208 days of uptime on 512 threads: /proc/stat's idle is near 9.3e18 ns, past INT64_MAX
	IDLE=$((9300000000000000000 / TICK))
	USER=$((IDLE / 10))
	echo "cpu  $USER 0 $USER $IDLE 0 0 0 0 0 0" >"$P/stat"
	fake_proc 10 worker 100 20
	usaged_start u --mode procfs --proc_root "$P" --interval 200ms
	usaged_tap u 3600 usage/ stat/
	usage_after 0
	n=$(usages)
	wb_put "$P/stat" "cpu  $((USER + 30)) 0 $((USER + 2)) $((IDLE + 400)) 0 0 0 0 0 0"
	usage_after $((n + 1)) # a reading after the change, whole
	# and, should that message have been on its way when n was counted, wait for the one after
	wb_wait_for 30 big_totals "$(usaged_tapfile u)" "$TICK" >/dev/null 2>&1 || true
	run big_totals "$(usaged_tapfile u)" "$TICK"
	assert_success
	assert_output ok
}
