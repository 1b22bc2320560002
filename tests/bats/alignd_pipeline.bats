#!/usr/bin/env bats
# alignd between the real powerd (an exec meter reading a constant 100 W) and
# usaged (procfs mode): slots of about 1 s with about 100 J each, processes and
# node CPU deltas, none extrapolated. (How soon a slot goes out is measured in bench/,
# not here: on a loaded machine it depends on the scheduler.)

load alignd_helper

teardown() { wb_kill_all; }

@test "real powerd and usaged in, slots of 100 W out" {
	d=$BATS_TEST_TMPDIR
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$d" --host n1 --interval 1s --source exec \
		--exec 'echo package-0 100 w'
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$d" --host n1 --interval 1s --mode procfs
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$d" --max_lag 30s
	wb_spawn tap "$WATTBUS" tap --timeout 120s "ipc://$d/alignd.sock" aligned/
	# Slots that closed before powerd's first sample have no zones: four after those.
	wb_wait_lines "$d/tap.log" 4 120 '"zones":\[{'
	run python3 - "$d/tap.log" <<-'EOF2'
		import json, sys
		slots = [json.loads(l)["msg"] for l in open(sys.argv[1])]
		while slots and not slots[0].get("zones"):
		    slots.pop(0)
		assert len(slots) >= 4, slots
		for s in slots:
		    secs = (s["t1"] - s["t0"]) / 1e9
		    e = s["zones"][0]["energy_uj"]
		    assert s["host"] == "n1" and s["power_host"] == "n1", s
		    assert abs(e - 100e6 * secs) < 1e6, (e, secs)   # 100 W, within 1 J
		    # power came in time: within max_lag, never extrapolated
		    assert s["quality"].get("lag_ns", 0) < 30e9, s["quality"]
		    assert not s["quality"].get("extrapolated"), s["quality"]
		    total = sum(s["cpu"].values())  # node CPU deltas: about ncpu seconds per second
		    assert 0.8 * 1e9 * secs * s["ncpu"] < total < 1.2 * 1e9 * secs * s["ncpu"], s["cpu"]
		for a, b in zip(slots, slots[1:]):
		    assert b["t0"] == a["t1"], (a["t1"], b["t0"])
		print("ok")
	EOF2
	assert_success
	assert_output "ok"
}
