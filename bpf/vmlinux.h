/*
 * The few kernel types usaged.bpf.c needs, checked in instead of a full
 * `bpftool btf dump` so the BPF object builds the same on any host (no BTF,
 * another kernel, a chroot) and reproducibly. CO-RE matches structs and fields
 * by name at load time, so only the fields read here are declared; offsets
 * come from the running kernel's BTF. To use another field, copy its
 * declaration from `bpftool btf dump file /sys/kernel/btf/vmlinux format c`.
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef int pid_t;

/* Only so that bpf_helper_defs.h's prototypes compile. */
enum rc_proto { RC_PROTO_UNKNOWN = 0 };

/* include/uapi/linux/bpf.h: stable ABI, values never change. */
enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERF_EVENT_ARRAY = 4,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};
enum {
	BPF_F_NO_PREALLOC = 1,
};
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};
enum {
	BPF_F_INDEX_MASK = 0xffffffffULL,
	BPF_F_CURRENT_CPU = BPF_F_INDEX_MASK,
};
struct bpf_perf_event_value {
	__u64 counter;
	__u64 enabled;
	__u64 running;
};

/* include/linux/sched.h */
#define PF_EXITING 0x00000004
#define TASK_DEAD 0x00000080 /* in __state from do_task_dead() to the final switch-out */

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live; /* threads not yet in do_exit() */
};

struct sched_entity {
	u64 sum_exec_runtime; /* ns on CPU, the kernel's own count behind /proc/<pid>/stat */
};

struct task_struct {
	unsigned int __state; /* 5.14 and later */
	unsigned int flags;
	struct sched_entity se;
	pid_t pid;
	pid_t tgid;
	struct task_struct *group_leader;
	u64 start_time;	    /* CLOCK_MONOTONIC ns at fork */
	u64 start_boottime; /* ns since boot, what /proc/<pid>/stat field 22 shows in ticks */
	char comm[16];
	struct signal_struct *signal;
};

/* The same field before 5.14 (CO-RE flavour: the suffix after ___ is ignored when matching). */
struct task_struct___pre514 {
	long state;
};

#pragma clang attribute pop

#endif
