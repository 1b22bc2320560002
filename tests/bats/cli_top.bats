#!/usr/bin/env bats
# wattbus top: estimate messages published with `wattbus pub`, rendered
# frames checked for the watts (energy_uj / (t1 - t0)), the order and the layout.

load helper

T0=1800000000000000000

# est HOST T0 DT_NS PROCS_JSON [ZONES_JSON] [EXTRA_JSON]: one estimate as a JSON line.
est() {
	local zones=${5:-'[{"name":"package-0","zone":"package","energy_uj":20000000,"active_uj":12000000,"idle_uj":8000000,"unattributed_uj":2000000},{"name":"core-0","zone":"core","energy_uj":8000000,"active_uj":6000000,"idle_uj":2000000,"unattributed_uj":1500000},{"name":"dram-0","zone":"dram","energy_uj":4000000,"active_uj":2000000,"idle_uj":2000000}]'}
	printf '{"kind":"estimate","host":"%s","t0":%s,"t1":%s,"mode":"measured","ncpu":4,"cpu_usage_ratio":0.5,"zones":%s,"procs":%s%s}\n' \
		"$1" "$2" "$(($2 + $3))" "$zones" "$4" "${6:-}"
}

PROCS='[{"pid":11,"comm":"idle-ish","cpu_ns":100000000,"energy_uj":[1000000,500000,0]},
{"pid":10,"comm":"busy","cpu_ns":1500000000,"energy_uj":[6000000,3000000,1000000]},
{"pid":12,"comm":"mid","cpu_ns":500000000,"container_id":"abcdef0123456789abcdef","energy_uj":[3000000,1000000,1000000]},
{"pid":13,"comm":"gone","cpu_ns":20000000,"exited":true,"energy_uj":[200000,100000,0]}]'
GROUPS_JSON=',"containers":[{"id":"abcdef0123456789abcdef","name":"web","cpu_ns":500000000,"energy_uj":[3000000,1000000,1000000]},{"id":"f00d","cpu_ns":40000000,"energy_uj":[8000000,0,2000000]}],"pods":[{"id":"pod-uid-1","name":"default/web-0","cpu_ns":500000000,"energy_uj":[3000000,1000000,1000000]}]'

# top_run OUT top-args... (in the background; pub then publishes to it)
top_bg() {
	local out=$1
	shift
	"$WATTBUS" top "$@" >"$BATS_TEST_TMPDIR/$out" 2>"$BATS_TEST_TMPDIR/$out.err" &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	TOP_PID=$!
}

pub() {
	tr -d '\n' | sed 's/}{"kind"/}\n{"kind"/g; $a\' | "$WATTBUS" pub --wait 30s "$@" "$(wb_ep est)" >/dev/null
}

# frame_of LEN_NS PROCS [ZONES [GROUPS]]: one `top --plain --once` frame of host h1's slot
# [T0, T0 + LEN_NS) (est's arguments), in $output.
frame_of() {
	top_bg frame --plain --once --timeout 20s "$(wb_ep est)"
	est h1 "$T0" "$@" | pub
	wait "$TOP_PID"
	run cat "$BATS_TEST_TMPDIR/frame"
}

teardown() {
	wb_kill_all
	[ -z "${TOP_TMP:-}" ] || rm -rf "$TOP_TMP"
}

@test "one slot: zone watts, node total without double counting core, processes, containers and pods by watts" {
	frame_of 2000000000 "$PROCS" "" "$GROUPS_JSON"
	# 2 s slot: 20 J package = 10 W, 12 J active = 6 W, 8 J idle = 4 W, 2 J unattributed = 1 W.
	assert_line --regexp '^host h1  slot ending [0-9:]{8} \(2\.000 s\)  measured  CPU 50\.0% of 4$'
	assert_line --regexp '^package-0 +10\.000 +6\.000 +4\.000 +1\.000$'
	assert_line --regexp '^core-0 +4\.000 +3\.000 +1\.000 +0\.750$'
	assert_line --regexp '^dram-0 +2\.000 +1\.000 +1\.000 +0\.000$'
	# core is inside package: node = package + dram.
	assert_line --regexp '^node +12\.000 +7\.000 +5\.000 +1\.000  \(package\+dram\)$'
	# busy: (6 + 1) J / 2 s = 3.5 W, 1.5 s CPU / 2 s = 75 %; sorted by watts.
	procs=$(sed -n '/^PROCESSES/,/^$/p' "$BATS_TEST_TMPDIR/frame" | tail -n +2 | sed '/^$/d')
	[ "$(echo "$procs" | awk '{print $4"="$1}' | tr '\n' ' ')" = "busy=3.500 mid=2.000 idle-ish=0.500 gone=0.100 " ] ||
		fail "processes: $procs"
	echo "$procs" | grep -qE '^ +3\.500 +75\.0 +10  busy$'
	echo "$procs" | grep -qE '^ +2\.000 +25\.0 +12  mid +abcdef012345$'
	echo "$procs" | grep -qE '^ +0\.100 +1\.0 +13  gone +\(exited\)$'
	# f00d: (8 + 2) J / 2 s = 5 W, ahead of web's 2 W; a group without a name shows its id.
	conts=$(sed -n '/^CONTAINERS/,/^$/p' "$BATS_TEST_TMPDIR/frame" | sed '/^$/d')
	[ "$(echo "$conts" | sed -n 2p)" = "                 5.000     2.0  f00d" ] || fail "containers: $conts"
	[ "$(echo "$conts" | sed -n 3p)" = "                 2.000    25.0  web (abcdef012345)" ] || fail "containers: $conts"
	assert_line --regexp '^ +2\.000 +25\.0  default/web-0 \(pod-uid-1\)$'
	run grep -c $'\e' "$BATS_TEST_TMPDIR/frame"
	assert_output 0
}

@test "a psys or platform zone is the node total; --rows keeps the top N by watts" {
	zones='[{"name":"package-0","zone":"package","energy_uj":3000000,"active_uj":2000000,"idle_uj":1000000},{"name":"psys","zone":"psys","energy_uj":5000000,"active_uj":3000000,"idle_uj":2000000}]'
	procs=
	for i in $(seq 1 15); do
		# pid 100+i uses i * 10 mJ of psys in a 1 s slot: i * 0.01 W; package energy must not count.
		procs+="${procs:+,}{\"pid\":$((100 + i)),\"comm\":\"p$i\",\"cpu_ns\":$((i * 1000000)),\"energy_uj\":[999999,$((i * 10000))]}"
	done
	top_bg frame --plain --once --rows 5 --timeout 20s "$(wb_ep est)"
	est h1 $T0 1000000000 "[$procs]" "$zones" | pub
	wait "$TOP_PID"
	run cat "$BATS_TEST_TMPDIR/frame"
	assert_line --regexp '^node +5\.000 +3\.000 +2\.000 +0\.000  \(psys\)$'
	got=$(sed -n '/^PROCESSES/,/^$/p' "$BATS_TEST_TMPDIR/frame" | awk '$4 ~ /^p/ {print $4"="$1}' | tr '\n' ' ')
	[ "$got" = "p15=0.150 p14=0.140 p13=0.130 p12=0.120 p11=0.110 " ] || fail "top 5: $got"
	assert_line --regexp '^ +\+10 more$'
}

@test "a platform zone estimd did not attribute is the node total; processes show the zones they were given" {
	zones='[{"name":"package-0","zone":"package","energy_uj":3000000,"active_uj":2000000,"idle_uj":1000000},{"name":"platform","zone":"platform","energy_uj":10000000,"active_uj":6000000,"idle_uj":4000000,"unattributed_uj":6000000}]'
	procs='[{"pid":101,"comm":"p1","cpu_ns":500000000,"energy_uj":[1500000,0]},{"pid":102,"comm":"p2","cpu_ns":250000000,"energy_uj":[500000,0]}]'
	frame_of 1000000000 "$procs" "$zones"
	assert_line --regexp '^node +10\.000 +6\.000 +4\.000 +6\.000  \(platform\)$'
	got=$(sed -n '/^PROCESSES/,/^$/p' "$BATS_TEST_TMPDIR/frame" | awk '$4 ~ /^p/ {print $4"="$1}' | tr '\n' ' ')
	[ "$got" = "p1=1.500 p2=0.500 " ] || fail "processes: $got"
}

@test "psys and platform together: the node total is the platform meter's alone, not both" {
	zones='[{"name":"psys","zone":"psys","energy_uj":6000000,"active_uj":4000000,"idle_uj":2000000},{"name":"platform","zone":"platform","energy_uj":8100000,"active_uj":5000000,"idle_uj":3100000,"unattributed_uj":5000000}]'
	procs='[{"pid":101,"comm":"p1","cpu_ns":500000000,"energy_uj":[1500000,0]}]'
	frame_of 1000000000 "$procs" "$zones"
	# 14.1 W would be psys and platform added up
	assert_line --regexp '^node +8\.100 +5\.000 +3\.100 +5\.000  \(platform\)$'
}

@test "refreshed every slot: --count 2 draws both slots, with ANSI clear+home and nothing else" {
	top_bg frames --count 2 --timeout 60s "$(wb_ep est)"
	f=$BATS_TEST_TMPDIR/frames
	est h1 $T0 2000000000 "$PROCS" | pub
	# the next slot once the first is drawn (top draws what is queued as one frame): same
	# energies over 4 s, so half the watts
	wb_wait_for 60 grep -qE '^package-0 +10\.000 ' "$f" || fail "no first frame: $(cat "$f.err")"
	est h1 $((T0 + 2000000000)) 4000000000 "$PROCS" | pub
	wait "$TOP_PID"
	[ "$(grep -o $'\e\\[H\e\\[2J' "$f" | wc -l)" = 3 ] # the waiting screen, then two frames
	# no escape sequence other than home and clear
	[ "$(sed $'s/\e\\[H\e\\[2J//g' "$f" | grep -c $'\e')" = 0 ]
	grep -qE '^package-0 +10\.000 ' "$f"
	grep -qE '^package-0 +5\.000 ' "$f"
	# the last frame on screen is the second slot
	tail -n +"$(grep -n $'\e' "$f" | tail -n 1 | cut -d: -f1)" "$f" | grep -qE '^ +1\.750 +37\.5 +10  busy$'
}

@test "terminal width: --width and \$COLUMNS cut every line" {
	top_bg narrow --plain --once --width 45 --timeout 20s "$(wb_ep est)"
	est h1 $T0 2000000000 "$PROCS" "" "$GROUPS_JSON" | pub
	wait "$TOP_PID"
	[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$BATS_TEST_TMPDIR/narrow")" -le 45 ]
	grep -qE '^package-0 +10\.000' "$BATS_TEST_TMPDIR/narrow"
	COLUMNS=60 top_bg cols --plain --once --timeout 20s "$(wb_ep est)"
	est h1 $T0 2000000000 "$PROCS" "" "$GROUPS_JSON" | pub
	wait "$TOP_PID"
	[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$BATS_TEST_TMPDIR/cols")" -eq 60 ]
}

@test "two hosts: one block each, sorted by host; --host shows one" {
	top_bg both --plain --count 2 --timeout 60s "$(wb_ep est)"
	est zeta $T0 1000000000 "$PROCS" | pub
	# alpha once zeta's frame is drawn (top draws what is queued as one frame)
	wb_wait_for 60 grep -q '^host zeta ' "$BATS_TEST_TMPDIR/both" || fail "no first frame: $(cat "$BATS_TEST_TMPDIR/both.err")"
	est alpha $T0 1000000000 "$PROCS" | pub
	wait "$TOP_PID"
	# the second frame holds both hosts, alpha first
	[ "$(grep '^host ' "$BATS_TEST_TMPDIR/both" | tail -n 2 | cut -d' ' -f2 | tr '\n' ' ')" = "alpha zeta " ]
	top_bg one --plain --once --host zeta --timeout 20s "$(wb_ep est)"
	{
		est alpha $T0 1000000000 "$PROCS"
		est zetaplus $T0 1000000000 "$PROCS"
		est zeta $T0 1000000000 "$PROCS"
	} | pub --interval 300ms
	wait "$TOP_PID"
	[ "$(grep '^host ' "$BATS_TEST_TMPDIR/one" | cut -d' ' -f2)" = zeta ]
}

@test "default endpoint: estimd.sock in the runtime directory lib/daemon.c uses" {
	if [ "$(id -u)" = 0 ]; then
		# root's is /run/wattbus; check the non-root rule as nobody.
		rt=$(mktemp -d /tmp/wb-top.XXXXXX) # nobody cannot reach the bats temp dir
		TOP_TMP=$rt
		chmod 0777 "$rt"
		mkdir "$rt/bin" && cp "$WATTBUS" "$rt/bin/wattbus"
		bin=$rt/bin/wattbus
		as=(setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_RUNTIME_DIR="$rt")
	else
		rt=$BATS_TEST_TMPDIR
		bin=$WATTBUS
		as=(env XDG_RUNTIME_DIR="$rt")
	fi
	mkdir -p "$rt/wattbus" && chmod 0777 "$rt/wattbus"
	"${as[@]}" "$bin" top --plain --once --timeout 20s >"$BATS_TEST_TMPDIR/frame" 2>&1 &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	pid=$!
	est h1 $T0 2000000000 "$PROCS" | tr -d '\n' | sed '$a\' |
		"${as[@]}" "$bin" pub --wait 30s "ipc://$rt/wattbus/estimd.sock" >/dev/null
	wait "$pid"
	grep -qE '^package-0 +10\.000' "$BATS_TEST_TMPDIR/frame"
}

@test "no estimates: --timeout exits 1 with a message; usage errors exit 2" {
	run "$WATTBUS" top --plain --once --timeout 300ms "$(wb_ep nothing)"
	assert_failure 1
	assert_output --partial "$BATS_TEST_TMPDIR/nothing.sock: no such socket after 0.3 s"
	# A socket that exists but gets no estimate.
	wb_spawn quiet python3 -c 'import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); time.sleep(60)' "$BATS_TEST_TMPDIR/quiet.sock"
	wb_wait_for 20 test -S "$BATS_TEST_TMPDIR/quiet.sock" || fail "$(cat "$BATS_TEST_TMPDIR/quiet.log")"
	run "$WATTBUS" top --plain --once --timeout 300ms "$(wb_ep quiet)"
	assert_failure 1
	assert_output --partial "no estimate on $(wb_ep quiet) for 0.3 s"
	run "$WATTBUS" top --count 0
	assert_failure 2
	run "$WATTBUS" top --rows x
	assert_failure 2
	run "$WATTBUS" top a b
	assert_failure 2
	run "$WATTBUS" top --help
	assert_success
	assert_output --partial '--plain'
}
