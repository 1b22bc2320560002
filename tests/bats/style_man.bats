#!/usr/bin/env bats
# Every man page renders with no troff warning (make man-check, a step of make check: groff -ww),
# and the check fails on a page that has one, naming it: troff takes a line that starts with '.'
# for a request and drops its text, as wattbus(1) lost its `./read-meter.py | wattbus pub` example.

load helper

@test "make man-check: every page is clean; a page with a warning fails it, named" {
	run make -s -C "$WB_ROOT" man-check
	assert_success
	assert_output ""
	d=$BATS_TEST_TMPDIR/man
	mkdir -p "$d"
	printf '.TH X 1\n.SH EXAMPLE\n.nf\n./read-meter.py | wattbus pub\n.fi\n' >"$d/x.1"
	run make -s -C "$WB_ROOT" man-check MAN_PAGES="$d/x.1"
	assert_failure
	assert_output --partial "$d/x.1:4: warning: macro '/read-meter.py' not defined"
	assert_output --partial "man-check: the man pages above have troff warnings"
	# escaped with \&, the same line is text: the failure above was the warning, not the setup
	printf '.TH X 1\n.SH EXAMPLE\n.nf\n\\&./read-meter.py | wattbus pub\n.fi\n' >"$d/x.1"
	run make -s -C "$WB_ROOT" man-check MAN_PAGES="$d/x.1"
	assert_success
	run groff -Tutf8 -man -P-cbou "$d/x.1"
	assert_output --partial "./read-meter.py | wattbus pub"
}
