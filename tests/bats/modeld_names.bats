#!/usr/bin/env bats
# A model name cannot forge modeld's log: one with a control character is refused
# by the codec (naming the key), and what a name may hold that a reader could
# still be misled by (a right-to-left override, a backslash) is logged escaped.

load helper
load modeld_helper

teardown() { wb_kill_all; }

@test "model names: a newline is refused and counted, an override is logged escaped" {
	local bus
	bus=$(wb_ep trainer)
	md_start modeld --sub "$bus"
	wb_tap tap "ipc://$MD_RT/modeld.sock"
	python3 - "$bus" <<-'PY'
		import msgpack, sys, zmq
		ctx = zmq.Context()
		s = ctx.socket(zmq.XPUB)
		s.bind(sys.argv[1])
		s.recv()
		spec = {"processor": "Intel(R) Xeon(R) CPU E3-1230 v6 @ 3.50GHz", "cores": 8, "chips": 1,
		        "memory_gib": 31, "frequency_mhz": 3900}
		def model(seq, name, processor=spec["processor"]):
		    return msgpack.packb({"v": 1, "kind": "model", "host": "node-a", "src": "estimd", "epoch": 1,
		        "seq": seq, "t": 9, "name": name, "type": "AbsPower", "ncpu": 8, "mae": 1.5,
		        "spec": dict(spec, processor=processor), "features": ["bpf_cpu_time_ms"],
		        "zones": [{"zone": "package", "bias_w": 12.5, "weights": [3.25], "scales": [1000], "means": [400]}]})
		s.send_multipart([b"model/node-a", model(0, "m\nwattbus-modeld: error: forged")])
		s.send_multipart([b"model/node-a", model(1, "ok", "Xeon\x1b[2J")])
		s.send_multipart([b"model/node-a", model(2, "tr\u202eniart\\x")])
		s.close(linger=30000)
		ctx.term()
	PY
	wb_wait_lines "$BATS_TEST_TMPDIR/modeld.log" 1 30 'model/node-a (tr'
	run cat "$BATS_TEST_TMPDIR/modeld.log"
	refute_line --partial 'wattbus-modeld: error: forged'
	assert_line --partial 'model/node-a (tr\xe2\x80\xaeniart\\x): stored'
	assert_output --partial 'name: control character U+000A at byte 1 (a name holds none)'
	assert_output --partial 'spec.processor: control character U+001B at byte 4 (a name holds none)'
	# both refusals counted as type in modeld's stat message
	wb_wait_for 30 bash -c 'grep "\"topic\":\"stat/" "$0" | tail -n 1 | jq -e "[.msg.rejected_by[] | select(.name == \"type\") | .value] == [2]" >/dev/null' "$BATS_TEST_TMPDIR/tap.all"
}
