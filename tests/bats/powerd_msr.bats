#!/usr/bin/env bats
# powerd's msr source on files laid out like /dev/cpu/N/msr (register number =
# file offset): Intel two-socket and AMD, exact totals across the 32-bit wrap.

load powerd_helper

# pd_msr CPU REG VALUE: write a 64-bit little-endian register into the fake device file.
pd_msr() {
	local f=$PDR/dev/cpu/$1/msr
	mkdir -p "$(dirname "$f")"
	python3 -c 'import struct,sys,os
f, reg, val = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3], 0)
fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, struct.pack("<Q", val), reg)
os.close(fd)' "$f" "$2" "$3"
}

pd_topology() {
	wb_put "$PDR/sys/devices/system/cpu/cpu$1/topology/physical_package_id" "$2"
}

teardown() { wb_kill_all; }

# ticks -> uJ as powerd computes them: floor(ticks * 1e6 / 2^esu)
uj() { python3 -c "print($1 * 1000000 // 2**$2)"; }

@test "Intel msr: zones per socket, energy units, totals exact across the 32-bit wrap" {
	for c in 0 1 2 3; do pd_topology $c $((c / 2)); done
	for c in 0 2; do
		pd_msr $c 0x606 0xa0e03 # ESU 14
		pd_msr $c 0x611 $((0xfffff000 + c))
		pd_msr $c 0x639 100
	done
	pd_msr 0 0x619 5000
	# DRAM's unit is given, so the test does not depend on this machine's CPU model
	pd_start --msr_dram_unit_nj 15300
	pd_wait_power 1
	run bash -c "pd_tap_lines | jq -c 'select(.topic == \"power/testhost\") | [.msg.zones[] | [.name, .source, (.path | sub(\".*/dev/cpu/\"; \"\"))]]' | head -1"
	assert_output '[["package-0","msr","0/msr:0x611"],["core-0","msr","0/msr:0x639"],["dram-0","msr","0/msr:0x619"],["package-1","msr","2/msr:0x611"],["core-1","msr","2/msr:0x639"]]'
	pd_wait_energy package-0 "$(uj 0xfffff000 14)"
	pd_wait_energy dram-0 $((5000 * 15300 / 1000))
	# package-0 advances 0x800 ticks per step: the second step wraps the 32-bit counter
	ticks=$((0xfffff000))
	for step in 1 2 3 4; do
		ticks=$((ticks + 0x800))
		pd_msr 0 0x611 $((ticks % (1 << 32)))
		pd_wait_energy package-0 "$(uj $ticks 14)"
	done
	pd_msr 0 0x619 $((5000 + 65536))
	pd_wait_energy dram-0 $(((5000 + 65536) * 15300 / 1000))
	pd_wait_stat wraps 1 5
}

@test "AMD msr: the package counter with its energy unit" {
	pd_topology 0 0
	# AMD's registers are one apart, so in a file the 8-byte values overlap: write the
	# unit first; the package counter then covers only the unit's bytes 2-7 (ESU is in byte 1).
	pd_msr 0 0xc0010299 0xa1003 # ESU 16
	pd_msr 0 0xc001029b 0xffffff00
	pd_start
	pd_wait_energy package-0 "$(uj 0xffffff00 16)"
	pd_msr 0 0xc001029b 0x100
	pd_wait_energy package-0 "$(uj $((0xffffff00 + 0x200)) 16)"
	grep -q "AMD RAPL, energy unit 1/2^16 J" "$BATS_TEST_TMPDIR/powerd.log"
}
