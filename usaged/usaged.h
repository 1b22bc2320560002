/*
 * usaged's private header: the modules and what they share, grouped by file.
 * ident.c, procfs.c parsing and ptab.c are pure; cgroups.c, procfs.c scanning
 * and bpfsrc.c touch the system.
 */
#ifndef USAGED_H
#define USAGED_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wb_msgs.h"

#include "../bpf/usaged.h"

#define USAGED_PATH_MAX 512

/* One process as a source sees it at one scan. */
struct usaged_sample {
	uint32_t pid;
	uint64_t start_ns;   /* ns since boot (CLOCK_BOOTTIME); bpf: exact, /proc: in clock ticks */
	uint64_t kcgroup_id; /* cgroup v2 id from the kernel; 0: the source does not know */
	uint64_t cpu_ns;     /* cumulative; see ptab_new() for since when */
	uint64_t counters[USAGED_NCOUNTERS];
	char comm[USAGED_COMM_LEN]; /* raw bytes, NUL-terminated; ptab sanitises */
	bool exited;		    /* these are its final values */
	bool transient; /* seen running only, not kept by the source: absence is not an exit */
};

extern const char *const usaged_counter_names[USAGED_NCOUNTERS];

/* ---- ident.c: cgroup path -> container, pod, VM, service (pure) ---- */

/* Fill runtime, container_id, pod_uid, vm and service of out from a cgroup path. */
void ident_parse(const char *path, struct wb_cgroup *out);

/* What /proc/<pid>/cgroup says: the v2 path and the v1 path that best names the process. */
struct ident_cgfile {
	bool has_v2;
	char v2_path[USAGED_PATH_MAX];
	bool has_v1;
	char v1_controllers[64]; /* "cpu,cpuacct", "name=systemd" */
	char v1_path[USAGED_PATH_MAX];
};
/* Parse the text of /proc/<pid>/cgroup. Returns 0, or -1 when no line parses. */
int ident_parse_cgfile(const char *text, struct ident_cgfile *out);

/* A cgroup filesystem mount, from one /proc/self/mountinfo line. */
struct ident_mount {
	bool v2;
	char root[USAGED_PATH_MAX];  /* the hierarchy path mounted (usually "/") */
	char point[USAGED_PATH_MAX]; /* where */
	char options[256]; /* v1: super options, which name the controllers ("rw,cpu,cpuacct") */
};
/* Returns 1 for a cgroup mount (out filled), 0 for another filesystem, -1 when malformed. */
int ident_parse_mountinfo(const char *line, struct ident_mount *out);
/* Whether v1 mount m is the hierarchy /proc/<pid>/cgroup names by controllers ("cpu,cpuacct"). */
bool ident_mount_matches(const struct ident_mount *m, const char *controllers);

/* ---- procfs.c: /proc parsing (pure) and scanning ---- */

struct procfs_pstat {
	uint32_t pid;
	char comm[USAGED_COMM_LEN];
	uint64_t utime_ticks, stime_ticks, start_ticks;
};
/* Parse /proc/<pid>/stat. Returns 0 or -1. */
int procfs_parse_pstat(const char *text, struct procfs_pstat *out);
/* Make s valid UTF-8 in place: invalid or truncated sequences and control characters become '?'. */
void usaged_utf8_clean(char *s);

struct procfs;
typedef void(procfs_sample_fn)(void *arg, const struct usaged_sample *s);
/* root is "/proc" (tests pass a fake tree). NULL on failure (logged). */
struct procfs *procfs_new(const char *root);
void procfs_destroy(struct procfs **self_p);
uint64_t procfs_ns_per_tick(const struct procfs *self);
/* Node CPU totals in ns, cumulative since this procfs's first successful reading (the
 * producer's epoch), not since boot. Returns 0 or -1 (logged). */
int procfs_read_cpu(struct procfs *self, struct wb_cpu_times *out);
/* Read one process; returns 0, or -1 when it is gone or unreadable (errno set). */
int procfs_read_pid(struct procfs *self, uint32_t pid, struct usaged_sample *out);
/* Call fn for every process in root (the method Kepler >= 0.10 uses). Returns processes seen or -1.
 */
long procfs_scan(struct procfs *self, procfs_sample_fn *fn, void *arg);
/* A thread's run time in ns (the first field of <root>/<pid>/task/<tid>/schedstat). Returns 0 or
 * -1. */
int procfs_read_runtime(struct procfs *self, uint32_t pid, uint32_t tid, uint64_t *runtime_ns);
/* Whether the process (pid, start_ns) still runs (a ptab_alive_fn). */
bool procfs_alive(void *self, uint32_t pid, uint64_t start_ns);
/* Read <root>/<pid>/cgroup into buf. Returns its length or -1. */
long procfs_read_cgroup(struct procfs *self, uint32_t pid, char *buf, size_t size);
const char *procfs_root(const struct procfs *self);

/* ---- ptab.c: processes known, what each message carries (pure) ---- */

struct ptab;
/*
 * max: processes tracked at most. baseline_first: values seen at the first
 * scan become each process's zero (a source whose values count from the
 * process start, /proc); later processes count from 0, so that every source
 * publishes CPU time since the later of usaged's epoch and the process start.
 */
struct ptab *ptab_new(size_t max, bool baseline_first);
void ptab_destroy(struct ptab **self_p);
/* Start a scan for message msgno. */
void ptab_begin(struct ptab *self, uint64_t msgno);
/* Record one sample. Returns 0, or -1 when the table is full (counted in ptab_dropped). */
int ptab_put(struct ptab *self, const struct usaged_sample *s);
/*
 * End the scan; when complete, processes not seen in it have exited, except
 * those last seen transient that alive_fn (may be NULL) says still run.
 */
typedef bool(ptab_alive_fn)(void *arg, uint32_t pid, uint64_t start_ns);
void ptab_end(struct ptab *self, bool complete, ptab_alive_fn *alive_fn, void *arg);
/*
 * Decide each process's published cgroup id: fn runs for processes new in
 * this scan, whose kernel cgroup id changed, and (all_active) those that used
 * CPU in it. fn returns the id to publish (0: unknown).
 */
typedef uint64_t(ptab_cgroup_fn)(void *arg, uint32_t pid, uint64_t kcgroup_id);
void ptab_resolve(struct ptab *self, bool all_active, ptab_cgroup_fn *fn, void *arg);
/*
 * Decide each process's published executable: fn runs for processes that have
 * something to report and are new, or whose comm changed since (an exec), not
 * for exited ones. fn returns the id to publish (0: unknown).
 */
typedef uint64_t(ptab_exe_fn)(void *arg, uint32_t pid);
void ptab_resolve_exes(struct ptab *self, ptab_exe_fn *fn, void *arg);
/*
 * Fill msg->procs: with full, every process that used CPU since the epoch;
 * else those that used CPU in the last retire_after messages. Exited processes
 * are listed once more with exited=true. Returns 0 or -1 (out of memory).
 */
int ptab_build(struct ptab *self, bool full, uint64_t retire_after, struct wb_usage *msg);
/* After the message went out: forget exited processes, calling fn for each (may be NULL). */
typedef void(ptab_retire_fn)(void *arg, uint32_t pid, uint64_t start_ns);
size_t ptab_retire(struct ptab *self, ptab_retire_fn *fn, void *arg);
size_t ptab_count(const struct ptab *self);
uint64_t ptab_dropped(const struct ptab *self);

/* ---- dict.c: id -> item dictionaries (cgroups, exes), what a message carries (pure) ---- */

struct dict;
/* Items of item_size bytes, at most max of them. NULL on ENOMEM. */
struct dict *dict_new(size_t item_size, size_t max);
void dict_destroy(struct dict **self_p);
/* Start the work for message msgno: what is looked up or set from now on is used in it. */
void dict_begin(struct dict *self, uint64_t msgno);
/* id's item (owned by the dictionary), marked used; NULL when unknown. */
void *dict_get(struct dict *self, uint64_t id);
/* id's item zeroed for the caller to fill, new or replacing the old, and sent again as new;
 * NULL when id is 0, the dictionary is full (dict_full) or on ENOMEM. */
void *dict_set(struct dict *self, uint64_t id);
bool dict_full(const struct dict *self);
size_t dict_count(const struct dict *self);
/*
 * The items a message carries for the ids at id_off in its nprocs processes
 * (proc_size bytes apart), each once: all of them when full, else those first
 * sent in the last retire_after messages. *out is a wb_array_new array of
 * *nout items (NULL when none). Returns 0 or -1 (ENOMEM).
 */
int dict_fill(struct dict *self, const void *procs, size_t nprocs, size_t proc_size, size_t id_off,
	      bool full, uint64_t retire_after, void **out, size_t *nout);
/* Forget items no message used in the last unused_msgs messages. */
void dict_evict(struct dict *self, uint64_t unused_msgs);

/* ---- exes.c: process -> executable path, and which go in a message ---- */

struct exes;
/* Reads <procfs root>/<pid>/exe. NULL on ENOMEM. */
struct exes *exes_new(struct procfs *pf);
void exes_destroy(struct exes **self_p);
void exes_begin(struct exes *self, uint64_t msgno);
/* The id to publish for pid's executable (a ptab_exe_fn); 0 for a kernel thread, a process
 * gone, one usaged may not read (counted in exes_read_errors) or a full table. */
uint64_t exes_resolve(void *self, uint32_t pid);
/* Fill msg->exes for the executables msg->procs name, as cgroups_fill. Returns 0 or -1. */
int exes_fill(struct exes *self, uint64_t retire_after, struct wb_usage *msg);
/* Forget paths no message named in the last unused_msgs messages. */
void exes_evict(struct exes *self, uint64_t unused_msgs);
size_t exes_count(const struct exes *self);
uint64_t exes_read_errors(const struct exes *self);
uint64_t exes_full_drops(const struct exes *self);
/* A path's id: its FNV-1a hash, below 2^63 and never 0 (pure). */
uint64_t exes_id(const char *path);
/* Cut path to fit size bytes on a UTF-8 character boundary, then make it valid UTF-8 (pure). */
void exes_clean(char *path, size_t size);

/* ---- cgroups.c: cgroup id -> path -> identity, and which go in a message ---- */

struct cgroups;
/* proc_root: "/proc"; the cgroup mounts come from <proc_root>/self/mountinfo. NULL on failure. */
struct cgroups *cgroups_new(struct procfs *pf);
void cgroups_destroy(struct cgroups **self_p);
/* Start the work for one message (bounds the cgroupfs walks to one per message). */
void cgroups_begin(struct cgroups *self, uint64_t msgno);
/* The id to publish for a process (ptab_cgroup_fn); kcgroup_id 0: read /proc/<pid>/cgroup. */
uint64_t cgroups_resolve(void *self, uint32_t pid, uint64_t kcgroup_id);
/*
 * Fill msg->cgroups for the cgroups msg->procs name: all of them when
 * msg->full, else those first sent in the last retire_after messages.
 * Returns 0 or -1.
 */
int cgroups_fill(struct cgroups *self, uint64_t retire_after, struct wb_usage *msg);
size_t cgroups_count(const struct cgroups *self);
/* Forget identities no message named in the last unused_msgs messages. */
void cgroups_evict(struct cgroups *self, uint64_t unused_msgs);
/* A short description of the hierarchies found ("v2 at /sys/fs/cgroup/unified, v1 name=systemd").
 */
const char *cgroups_describe(const struct cgroups *self);

/* Ids from a v1 hierarchy carry this bit so they never equal a v2 id. */
#define CGROUPS_V1_BIT (1ull << 62)

/* ---- bpfsrc.c: the eBPF source ---- */

struct bpfsrc_opts {
	uint32_t max_procs; /* entries of the procs map */
	bool counters;	    /* try hardware counters */
};
struct bpfsrc_stats {
	uint64_t map_full, exits, perf_fail, unpaired, no_storage, entries;
	uint64_t
	    exits_forced; /* published as exited before every thread's final switch-out was seen */
};
struct bpfsrc;
/* Load and attach. NULL on failure, with why (one line) filled. */
struct bpfsrc *bpfsrc_new(const struct bpfsrc_opts *opts, char *why, size_t whylen);
void bpfsrc_destroy(struct bpfsrc **self_p);
/* Hardware counters in use (bit per enum usaged_counter). */
unsigned bpfsrc_counters(const struct bpfsrc *self);
/*
 * Put every process of the map into tab, plus what runs on each CPU right now
 * (pf reads the identity of a process that has not switched out yet). Returns
 * 0 when the whole map was read, -1 otherwise.
 */
int bpfsrc_scan(struct bpfsrc *self, struct ptab *tab, struct procfs *pf);
/* Delete an exited process's entry (ptab_retire_fn). */
void bpfsrc_retire(void *self, uint32_t pid, uint64_t start_ns);
void bpfsrc_stats(struct bpfsrc *self, struct bpfsrc_stats *out);
/* Why bpf cannot run here (not root, no BTF), or NULL when it may: usaged_bpf_probe on this host.
 */
const char *bpfsrc_unsupported(void);

/* ---- bpfprobe.c: can the eBPF source run here (usaged and wattbus doctor) ---- */
struct usaged_bpf_probe {
	char btf[512]; /* the kernel BTF file looked for */
	bool have_btf;
	bool sys_admin;	  /* CAP_SYS_ADMIN held */
	bool bpf_perfmon; /* CAP_BPF and CAP_PERFMON held */
	char why[768];	  /* why not, "" when it can */
	char fix[256];	  /* what to do about it, "" when it can */
};
/*
 * sys_root: /sys or a test tree; status_path: the /proc/PID/status whose CapEff
 * counts; kernel_release: for the advice on kernels before 5.8 (may be NULL).
 * true when BTF and the privileges are there.
 */
bool usaged_bpf_probe(const char *sys_root, const char *status_path, const char *kernel_release,
		      struct usaged_bpf_probe *p);

#endif
