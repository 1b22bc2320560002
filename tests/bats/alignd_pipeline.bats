#!/usr/bin/env bats
# alignd between the real powerd (an exec meter reading a constant 100 W) and
# usaged (procfs mode): slots holding the energy of powerd's curve over them
# (100 W per second of regular sampling), processes and node CPU deltas, none
# extrapolated. (How soon a slot goes out is measured in bench/, not here: on a
# loaded machine it depends on the scheduler, and so does how regularly powerd
# samples: a sample missed for long is not guessed, so slots are checked against
# the curve powerd published.)

load alignd_helper

teardown() { wb_kill_all; }

@test "real powerd and usaged in, slots of 100 W out" {
	d=$BATS_TEST_TMPDIR
	wb_spawn ptap "$WATTBUS" tap --timeout 300s "ipc://$d/powerd.sock" power/
	wb_spawn powerd "$WB_BUILD/wattbus-powerd" --runtime_dir "$d" --host n1 --interval 1s --source exec \
		--exec 'echo package-0 100 w'
	wb_spawn usaged "$WB_BUILD/wattbus-usaged" --runtime_dir "$d" --host n1 --interval 1s --mode procfs
	wb_spawn alignd "$WB_BUILD/wattbus-alignd" --runtime_dir "$d" --max_lag 30s
	wb_spawn tap "$WATTBUS" tap --timeout 300s "ipc://$d/alignd.sock" aligned/
	# Slots that closed before powerd's first sample have no zones: four after those.
	wb_wait_lines "$d/tap.log" 4 120 '"zones":\[{'
	run python3 - "$d/tap.log" "$d/ptap.log" <<-'EOF2'
		import json, sys
		def msgs(f):
		    out = []
		    for l in open(f):
		        try:
		            out.append(json.loads(l)["msg"])
		        except ValueError:
		            pass  # the line being written
		    return out
		slots = msgs(sys.argv[1])
		while slots and not slots[0].get("zones"):
		    slots.pop(0)
		assert len(slots) >= 4, slots
		curve = [(p["t"], p["zones"][0]["energy_uj"]) for p in msgs(sys.argv[2])]
		def energy(t):  # powerd's curve at t: interpolated, or at the last rate just past it
		    for (ta, ea), (tb, eb) in zip(curve, curve[1:]):
		        if ta <= t <= tb or (tb == curve[-1][0] and t > tb):
		            return ea + (eb - ea) * (t - ta) / (tb - ta)
		    raise AssertionError("t %d outside the power samples the tap saw" % t)
		# the meter: 100 W, so 100 J between samples one interval apart (exact on the grid step)
		assert any(tb - ta == 10**9 and eb - ea == 100 * 10**6 for (ta, ea), (tb, eb) in zip(curve, curve[1:])), curve
		checked = 0
		for s in slots:
		    secs = (s["t1"] - s["t0"]) / 1e9
		    assert s["host"] == "n1" and s["power_host"] == "n1", s
		    if s["t0"] >= curve[0][0]:
		        # the curve's energy over the slot, within 1 J (a slot end within snap of the
		        # last sample goes out at the last rate; the next slot corrects it)
		        want = energy(s["t1"]) - energy(s["t0"])
		        assert abs(s["zones"][0]["energy_uj"] - want) < 1e6, (s, want)
		        checked += 1
		    # power came in time: within max_lag, never extrapolated
		    assert s["quality"].get("lag_ns", 0) < 30e9, s["quality"]
		    assert not s["quality"].get("extrapolated"), s["quality"]
		    total = sum(s["cpu"].values())  # node CPU deltas: about ncpu seconds per second
		    assert 0.8 * 1e9 * secs * s["ncpu"] < total < 1.2 * 1e9 * secs * s["ncpu"], s["cpu"]
		assert checked >= 3, checked
		for a, b in zip(slots, slots[1:]):
		    assert b["t0"] == a["t1"], (a["t1"], b["t0"])
		print("ok")
	EOF2
	assert_success
	assert_output "ok"
}
