#!/usr/bin/env bats
# Plain `make` never installs packages: with a dependency missing it names what is
# missing and how to install it, and stops. (make run/check/bench/deps install.)

load helper

@test "plain make with a build tool missing stops and points at make deps" {
	# A missing clang is what a bare chroot looks like; -n keeps make from building.
	run make -C "$WB_ROOT" -n BUILD="$BATS_TEST_TMPDIR/b" CLANG=/nonexistent/clang all
	assert_failure
	assert_output --partial 'build dependencies missing'
	assert_output --partial 'make deps'
	refute_output --partial 'running scripts/deps.sh'
	assert_output --partial "/nonexistent/clang"
}

@test "scripts/deps.sh missing lists packages and installs nothing" {
	run "$WB_ROOT/scripts/deps.sh" missing build
	assert_success
	# Everything is installed on a machine that built wattbus: nothing to list.
	assert_output ''
	run "$WB_ROOT/scripts/deps.sh" missing bogus
	assert_failure 2
}
