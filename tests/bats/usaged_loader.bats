#!/usr/bin/env bats
# The BPF object is loaded in a short-lived child that passes the map and
# bpf_link fds back: usaged holds the links (its programs stay attached as long
# as it runs, and go with it), no child is left behind, and the kernel BTF the
# load parses never counts in usaged's peak RSS.
load helper
load usaged_helper

teardown() {
	wb_kill_all
}

# link_progs PID: the program ids behind PID's bpf_link fds, one a line
link_progs() {
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f")" = "anon_inode:bpf_link" ] || continue
		awk '/^prog_id:/ { print $2 }' "/proc/$1/fdinfo/${f##*/}"
	done
}

# kib PID FIELD: a /proc/PID/status field in KiB
kib() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

@test "bpf: usaged holds its programs' links, no loader child is left, peak RSS within 1.5x steady" {
	usaged_need_bpf
	usaged_start u --mode bpf --interval 300ms
	usaged_tap u 3600 usage/
	# a few messages: the steady state
	wb_wait_for 60 bash -c '[ "$(grep -c "\"kind\":\"usage\"" "$0")" -ge 5 ]' "$(usaged_tapfile u)"
	run grep -c '"src":"usaged/bpf"' "$(usaged_tapfile u)"
	[ "$output" -ge 5 ]
	# the switch program (one of two), exit and exec: three tracepoint links, held by usaged
	run link_progs "$PID_u"
	echo "$output"
	[ "${#lines[@]}" -eq 3 ]
	for f in /proc/"$PID_u"/fd/*; do
		[ "$(readlink "$f")" = "anon_inode:bpf_link" ] || continue
		grep -q "^link_type:[[:space:]]*raw_tracepoint" "/proc/$PID_u/fdinfo/${f##*/}"
	done
	run pgrep -P "$PID_u"
	assert_failure
	hwm=$(kib "$PID_u" VmHWM)
	rss=$(kib "$PID_u" VmRSS)
	echo "peak $hwm KiB, steady $rss KiB"
	# loaded in-process, the parsed kernel BTF put the peak at about 2.3x
	[ $((hwm * 2)) -le $((rss * 3)) ]
}

@test "bpf: the programs go when usaged is killed (the links were its alone)" {
	usaged_need_bpf
	command -v bpftool >/dev/null || skip "bpftool not installed"
	usaged_start u --mode bpf --interval 300ms
	mapfile -t progs < <(link_progs "$PID_u")
	[ "${#progs[@]}" -eq 3 ]
	for id in "${progs[@]}"; do bpftool prog show id "$id" >/dev/null; done
	kill -KILL "$PID_u"
	gone() {
		local id
		for id in "${progs[@]}"; do
			! bpftool prog show id "$id" >/dev/null 2>&1 || return 1
		done
	}
	# the kernel frees programs after an RCU grace period
	wb_wait_for 30 gone
}
