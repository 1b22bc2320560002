#!/usr/bin/env bats
# tap --check reports every bad frame with its reason and keeps decoding.

load helper

teardown() { wb_kill_all; }

@test "garbage and mutated frames are each reported, then the valid message decodes" {
	ep=$(wb_ep check)
	wb_spawn tap "$WATTBUS" tap --check --count 11 --timeout 60s "$ep"
	python3 - "$ep" <<-'PY'
		import msgpack, sys, zmq
		ctx = zmq.Context()
		s = ctx.socket(zmq.XPUB)
		s.bind(sys.argv[1])
		s.recv()
		good = {"v": 1, "kind": "power", "host": "h", "src": "t", "epoch": 1, "seq": 0,
		        "t": 5, "interval_ns": 1000000000,
		        "zones": [{"name": "package-0", "zone": "package", "energy_uj": 7}]}
		def mut(**kw):
		    m = dict(good); m.update(kw); return msgpack.packb(m)
		frames = [
		    [b"power/h", b"\xc1garbage"],                                   # malformed
		    [b"power/h", msgpack.packb(good) + b"\x00"],                    # trailing
		    [b"power/h", msgpack.packb([1, 2, 3])],                         # not_map
		    [b"power/h", mut(v=9)],                                         # version
		    [b"power/h", mut(kind="watts")],                                # kind
		    [b"power/h", mut(zones=[{"name": "p", "zone": "package", "energy_uj": "7"}])],  # type
		    [b"power/h", mut(host="x" * 100)],                              # bound
		    [b"power/h", msgpack.packb({k: v for k, v in good.items() if k != "t"})],  # missing
		    [b"power/other", msgpack.packb(good)],                          # topic
		    [b"power/h"],                                                   # one frame
		    [b"power/h", msgpack.packb(good)],                              # valid
		]
		for f in frames:
		    s.send_multipart(f)
		s.close(linger=30000)
		ctx.term()  # returns once the frames are out
	PY
	wb_wait_lines "$BATS_TEST_TMPDIR/tap.log" 11 15
	run jq -r 'if .rejected then .rejected else "valid:" + (.msg.zones[0].energy_uj | tostring) end' "$BATS_TEST_TMPDIR/tap.log"
	assert_output "$(printf '%s\n' malformed trailing not_map version kind type bound missing topic topic valid:7)"
	# Each rejection names what is wrong.
	run jq -r 'select(.rejected) | .error' "$BATS_TEST_TMPDIR/tap.log"
	assert_line --partial "zones[0].energy_uj: expected an unsigned integer, got a string"
	assert_line --partial "host: string of 100 bytes"
	assert_line --partial "missing required key 't'"
	assert_line --partial "version 9 of power is unknown"
	assert_line --partial "expected 2 frames (topic, map), got 1"
}
