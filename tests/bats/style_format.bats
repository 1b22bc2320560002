#!/usr/bin/env bats
# The tree is in .clang-format's style (make format-check, a step of make check), and the check
# fails on a file that is not.

load helper

@test "make format-check: the tree passes; a file out of style fails it, named" {
	run make -s -C "$WB_ROOT" format-check
	assert_success
	d=$BATS_TEST_TMPDIR/fmt
	mkdir -p "$d"
	cp "$WB_ROOT/.clang-format" "$d/"
	printf 'int f(int a){return a+1;}\n' >"$d/bad.c"
	run make -s -C "$WB_ROOT" format-check FORMAT_SRCS="$d/bad.c"
	assert_failure
	assert_output --partial "$d/bad.c"
	assert_output --partial "make format fixes them"
	# the same file in style passes: the failure above was the style, not the setup
	clang-format -i "$d/bad.c"
	run make -s -C "$WB_ROOT" format-check FORMAT_SRCS="$d/bad.c"
	assert_success
}
