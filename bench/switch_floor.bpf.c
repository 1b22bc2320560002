/*
 * The floor under usaged's context-switch cost: a program on usaged's hook
 * (tp_btf/sched_switch) that does nothing. bench/usaged.sh runs the switch
 * microbenchmark with it attached as with usaged: the difference from the run
 * without is what the hook's dispatch costs on this machine, whatever the
 * program does. Built and loaded by bench/usaged.sh (bench/switch_floor.c).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int empty_switch(__u64 *ctx)
{
	return 0;
}
