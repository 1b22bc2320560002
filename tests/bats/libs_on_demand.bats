#!/usr/bin/env bats
# libcurl and libfreeipmi are loaded when a setting needs them (lib/dl.h), not linked: a powerd
# reading RAPL maps neither (nor the TLS and Kerberos libraries libcurl brings); one asked for
# redfish or ipmi on a host where the library cannot be loaded says which library and which
# package, and the other sources go on.

load powerd_helper

teardown() { wb_kill_all; }

# maps_lib PID NAME: whether the process maps a library whose file name starts with NAME.
maps_lib() {
	awk '{ print $6 }' "/proc/$1/maps" | grep -q "/$2"
}

@test "powerd on RAPL maps neither libcurl nor libfreeipmi; with redfish configured it loads libcurl" {
	run readelf -d "$PD"
	refute_output --partial libcurl
	refute_output --partial libfreeipmi
	pd_rapl_zone intel-rapl:0 package-0 1000 262143328850
	pd_start --source rapl
	pd_wait_energy package-0 1000
	maps_lib "$PID_powerd" libzmq # the check sees what is mapped
	! maps_lib "$PID_powerd" libcurl
	! maps_lib "$PID_powerd" libfreeipmi
	! maps_lib "$PID_powerd" libgnutls
	wb_kill_all
	# redfish at an address where nothing listens: the source is set up, so libcurl is mapped
	(umask 077 && echo "root:calvin" >"$BATS_TEST_TMPDIR/cred")
	pd_start --source rapl,redfish --redfish_url https://127.0.0.1:9 \
		--redfish_credentials "$BATS_TEST_TMPDIR/cred"
	pd_wait_energy package-0 1000
	wb_wait_for 10 maps_lib "$PID_powerd" libcurl
}

@test "a libcurl or libfreeipmi that cannot be loaded: the source is refused naming the library and the package; RAPL goes on" {
	# a library directory searched first, holding broken copies under the sonames the build uses
	lib=$BATS_TEST_TMPDIR/lib
	mkdir -p "$lib"
	curl_so=$(strings "$PD" | grep -m1 '^libcurl\.so\.')
	ipmi_so=$(strings "$PD" | grep -m1 '^libfreeipmi\.so\.')
	[ -n "$curl_so" ] && [ -n "$ipmi_so" ]
	echo "not a library" >"$lib/$curl_so"
	echo "not a library" >"$lib/$ipmi_so"
	(umask 077 && echo "root:calvin" >"$BATS_TEST_TMPDIR/cred")
	pd_rapl_zone intel-rapl:0 package-0 1000 262143328850
	LD_LIBRARY_PATH=$lib pd_start --source rapl,redfish,ipmi --redfish_url https://127.0.0.1:9 \
		--redfish_credentials "$BATS_TEST_TMPDIR/cred"
	pd_wait_energy package-0 1000
	run cat "$BATS_TEST_TMPDIR/powerd.log"
	assert_output --partial "source redfish is not usable: cannot load $curl_so ("
	assert_output --partial "; install libcurl (Debian: libcurl4)"
	assert_output --partial "source ipmi is not usable: cannot load $ipmi_so ("
	assert_output --partial "; install libfreeipmi (Debian: libfreeipmi17)"
	[ "$(pd_stat_mode)" = rapl ]
}
