#!/usr/bin/env bats
# A SIGHUP that cannot open the sources again (out of memory: the new zone set
# cannot be allocated) keeps the running config and sources: powerd goes on
# sampling, and a later SIGHUP still works.

load powerd_helper

teardown() { wb_kill_all; }

# A preload that fails one calloc(1, sizeof(struct pd_set)) once $BATS_TEST_TMPDIR/oom exists.
build_shim() {
	local src=$BATS_TEST_DIRNAME/../..
	cat >"$BATS_TEST_TMPDIR/size.c" <<'C'
#include <stdio.h>
#include "powerd.h"
int main(void) { printf("%zu\n", sizeof(struct pd_set)); return 0; }
C
	cc -I"$src/powerd" -I"$src/lib" -I"$WB_BUILD/gen" -o "$BATS_TEST_TMPDIR/size" "$BATS_TEST_TMPDIR/size.c"
	cat >"$BATS_TEST_TMPDIR/shim.c" <<C
#include <stddef.h>
#include <unistd.h>
extern void *__libc_calloc(size_t n, size_t size);
void *calloc(size_t n, size_t size)
{
	if (n == 1 && size == $("$BATS_TEST_TMPDIR/size") && unlink("$BATS_TEST_TMPDIR/oom") == 0)
		return NULL;
	return __libc_calloc(n, size);
}
C
	cc -shared -fPIC -o "$BATS_TEST_TMPDIR/shim.so" "$BATS_TEST_TMPDIR/shim.c"
}

@test "SIGHUP that cannot allocate the new sources keeps the running ones" {
	ldd "$PD" | grep -q libasan && skip "a sanitizer build cannot take a preload"
	build_shim
	mkdir -p "$PDR/sys" "$BATS_TEST_TMPDIR/run"
	wb_spawn tap "$WATTBUS" tap --check "$PDEP"
	wb_spawn powerd env LD_PRELOAD="$BATS_TEST_TMPDIR/shim.so" "$PD" --sysfs_root "$PDR/sys" \
		--msr_root "$PDR/dev/cpu" --pub "$PDEP" --runtime_dir "$BATS_TEST_TMPDIR/run" \
		--interval 100ms --stat_interval 200ms --host testhost
	wb_wait_for 10 grep -q "no usable power meter" "$BATS_TEST_TMPDIR/powerd.log"
	touch "$BATS_TEST_TMPDIR/oom"
	kill -HUP "$PID_powerd"
	wb_wait_for 5 grep -q "reload: cannot open the sources again (out of memory); keeping the running config" "$BATS_TEST_TMPDIR/powerd.log"
	[ ! -e "$BATS_TEST_TMPDIR/oom" ]
	# it goes on sampling and publishing stat
	pd_wait_stat samples 1
	n=$(pd_stat_counter samples)
	pd_wait_stat samples $((n + 1))
	kill -0 "$PID_powerd"
	# and a later SIGHUP, with a meter now, opens it
	pd_rapl_zone intel-rapl:0 package-0 777 262143328850
	kill -HUP "$PID_powerd"
	pd_wait_energy package-0 777
}
