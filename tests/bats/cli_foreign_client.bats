#!/usr/bin/env bats
# A client written with python3-zmq and python3-msgpack speaks the bus both ways.

load helper

teardown() { wb_kill_all; }

@test "a python publisher's power message is decoded by tap --check" {
	ep=$(wb_ep py)
	wb_spawn tap "$WATTBUS" tap --check --count 1 --timeout 60s "$ep"
	python3 - "$ep" <<-'PY'
		import msgpack, sys, zmq
		ctx = zmq.Context()
		s = ctx.socket(zmq.XPUB)
		s.bind(sys.argv[1])
		s.recv()  # wait for tap's subscription
		m = {"v": 1, "kind": "power", "host": "bringup", "src": "meter.py", "epoch": 42, "seq": 0,
		     "t": 1700000000000000000, "interval_ns": 1000000000,
		     "zones": [{"name": "platform", "zone": "platform", "energy_uj": 123456789}]}
		s.send_multipart([b"power/bringup", msgpack.packb(m)])
		s.close(linger=30000)
		ctx.term()  # returns once the message is out
	PY
	wb_wait_for 10 test -s "$BATS_TEST_TMPDIR/tap.log"
	run jq -r '[.topic, .msg.src, .msg.zones[0].name, .msg.zones[0].energy_uj] | @tsv' "$BATS_TEST_TMPDIR/tap.log"
	assert_output $'power/bringup\tmeter.py\tplatform\t123456789'
}

@test "a python subscriber reads what wattbus pub sends" {
	ep=$(wb_ep py2)
	cat >"$BATS_TEST_TMPDIR/sub.py" <<-'PY'
		import msgpack, sys, zmq
		s = zmq.Context().socket(zmq.SUB)
		s.connect(sys.argv[1])
		s.setsockopt(zmq.SUBSCRIBE, b"usage/")
		s.setsockopt(zmq.RCVTIMEO, 60000)
		topic, body = s.recv_multipart()
		m = msgpack.unpackb(body, raw=False)
		print(topic.decode(), m["kind"], m["host"], m["procs"][0]["comm"], m["procs"][0]["cpu_ns"], m["cpu"]["steal_ns"])
	PY
	wb_spawn py python3 "$BATS_TEST_TMPDIR/sub.py" "$ep"
	grep '"usage/' "$WB_ROOT/tests/data/messages.jsonl" | "$WATTBUS" pub --wait 30s "$ep"
	wb_wait_for 30 grep -q usage "$BATS_TEST_TMPDIR/py.log"
	run cat "$BATS_TEST_TMPDIR/py.log"
	assert_output "usage/node-1 usage node-1 stress-ng 5000 8"
}
