/*
 * The eBPF source: loads bpf/usaged.bpf.c through its skeleton (open -> set
 * rodata and autoload -> load -> attach) in a short-lived child process, opens
 * the optional per-CPU perf counters, and reads the procs map plus what runs on
 * each CPU right now.
 *
 * Why a child: the load parses the kernel's BTF (/sys/kernel/btf/vmlinux,
 * megabytes) for the CO-RE relocations, which doubled usaged's peak RSS for
 * the sake of its first second. The child does the open, load and attach and
 * hands the map and bpf_link fds back over a socketpair (SCM_RIGHTS), then
 * exits; usaged holds only the fds. A link fd keeps its program attached for as
 * long as usaged holds it, and a perf event array keeps its entries for as long
 * as the map file they were set through is open, so usaged keeps those too.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "usaged.h"
#include "usaged.skel.h"

/*
 * An exited process is published once its every exiting thread was charged at
 * its final switch-out (dying 0). One that is gone from /proc (reaped) and
 * exited this long ago is published regardless (counted), so that a thread
 * whose last switch went unseen cannot hold its exit back for ever. Time alone
 * is no sign of that: on a loaded host the exit itself (tearing down a large
 * address space) can take longer than this, and publishing it then retires
 * the entry before the final switch-out charges the last run.
 */
#define EXIT_STALL_NS (10 * WB_NS_PER_SEC)
#define BATCH 4096

/* The maps usaged reads (and the counter arrays, whose entries live as long as their fd). */
enum { FD_PROCS, FD_CPUS, FD_STATS, FD_COUNTERS, NMAPFDS = FD_COUNTERS + USAGED_NCOUNTERS };
/* bpf_link fds: the switch program (one of two) and the exit and exec programs. */
#define MAX_LINKS 4

/* The loader child's one message; its fds (maps, then links) ride along. */
struct loader_reply {
	int32_t err; /* 0, or errno of what failed (why says what) */
	uint32_t nlinks;
	char why[1024]; /* room for why_failed's longest */
};

struct bpfsrc {
	int map_fds[NMAPFDS];		 /* -1 where not held */
	int link_fds[MAX_LINKS];	 /* -1 where not held */
	int ncpus;			 /* possible CPUs: per-CPU maps hold this many values */
	int *perf_fds[USAGED_NCOUNTERS]; /* per CPU, -1 where not open */
	unsigned counters;		 /* bit per counter in use */
	size_t batch;			 /* entries per lookup_batch call */
	bool no_batch;			 /* kernel without lookup_batch: walk the keys */
	struct usaged_key *keys;
	struct usaged_proc *vals;
	struct usaged_cpu *slots, *slots2; /* ncpus each */
	uint64_t *statvals;		   /* ncpus */
	uint64_t entries;		   /* in the map at the last scan */
	uint64_t exits_forced; /* exits published before every thread's final switch-out */
	struct wb_ratelimit rl;
};

/* Why a load failed, from libbpf's warnings: its first one, and the verifier's last word. */
static char libbpf_first[256], libbpf_verifier[256];

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[8192];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (level == LIBBPF_WARN) {
		/* The verifier's log comes as one message; its last line says what it refused. */
		char *end = strstr(buf, "-- END PROG LOAD LOG --");
		if (end) {
			/* Skip the statistics lines ("processed N insns", "verification time") at
			 * the end. */
			char *line;
			for (;;) {
				while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
					end--;
				line = end;
				while (line > buf && line[-1] != '\n')
					line--;
				if (line == buf || (strncmp(line, "processed ", 10) != 0 &&
						    strncmp(line, "verification time", 17) != 0))
					break;
				end = line;
			}
			snprintf(libbpf_verifier, sizeof(libbpf_verifier), "%.*s",
				 (int)(end - line), line);
		} else if (!libbpf_first[0]) {
			snprintf(libbpf_first, sizeof(libbpf_first), "%.*s",
				 (int)strcspn(buf, "\n"), buf);
		}
	}
	if (level != LIBBPF_DEBUG)
		log_debug("libbpf: %.*s", (int)strcspn(buf, "\n"), buf);
	return 0;
}

/* "what: strerror; libbpf's first warning; the verifier's last line" */
static void why_failed(char *why, size_t whylen, const char *what, int err)
{
	snprintf(why, whylen, "%s: %s%s%s%s%s", what, strerror(err), libbpf_first[0] ? "; " : "",
		 libbpf_first, libbpf_verifier[0] ? "; verifier: " : "", libbpf_verifier);
}

const char *bpfsrc_unsupported(void)
{
	static struct usaged_bpf_probe p;
	struct utsname u;
	if (usaged_bpf_probe("/sys", "/proc/self/status", uname(&u) == 0 ? u.release : NULL, &p))
		return NULL;
	return p.why;
}

static const struct {
	uint64_t hw, sw;
} perf_configs[USAGED_NCOUNTERS] = {
    [USAGED_CYCLES] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_SW_CPU_CLOCK},
    [USAGED_INSTRUCTIONS] = {PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_SW_CPU_CLOCK},
    [USAGED_CACHE_MISSES] = {PERF_COUNT_HW_CACHE_MISSES, PERF_COUNT_SW_CPU_CLOCK},
};

/*
 * Open counter c on every CPU. Returns 0, or -1 (errno) when it cannot be
 * counted everywhere. sw: the test hook, a software clock standing in for the
 * hardware event so the per-CPU plumbing can be tested on hosts without PMU.
 */
static int perf_open(struct bpfsrc *self, int c, bool sw)
{
	int opened = 0, err = 0;
	self->perf_fds[c] = malloc((size_t)self->ncpus * sizeof(int));
	if (!self->perf_fds[c])
		return -1;
	for (int cpu = 0; cpu < self->ncpus; cpu++) {
		struct perf_event_attr attr = {
		    .type = sw ? PERF_TYPE_SOFTWARE : PERF_TYPE_HARDWARE,
		    .size = sizeof(attr),
		    .config = sw ? perf_configs[c].sw : perf_configs[c].hw,
		};
		int fd =
		    (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		self->perf_fds[c][cpu] = fd;
		if (fd >= 0)
			opened++;
		else if (errno != ENODEV) /* ENODEV: an offline CPU */
			err = errno;
	}
	if (!err && opened)
		return 0;
	for (int cpu = 0; cpu < self->ncpus; cpu++)
		if (self->perf_fds[c][cpu] >= 0)
			close(self->perf_fds[c][cpu]);
	free(self->perf_fds[c]);
	self->perf_fds[c] = NULL;
	errno = err ? err : ENODEV;
	return -1;
}

static struct bpf_map *counter_map(struct usaged_bpf *skel, int c)
{
	switch (c) {
	case USAGED_CYCLES:
		return skel->maps.cycles;
	case USAGED_INSTRUCTIONS:
		return skel->maps.instructions;
	default:
		return skel->maps.cache_misses;
	}
}

/*
 * In the loader child: open, load, fill the counter arrays (self's perf fds,
 * inherited), attach. Fills fds (NMAPFDS map fds, then *nlinks link fds) and
 * returns 0, or returns an errno with why filled. The skeleton is never
 * destroyed: the child exits, and its fds go with it once passed on.
 */
static int load_attach(struct bpfsrc *self, const struct bpfsrc_opts *opts, int *fds,
		       uint32_t *nlinks, char *why, size_t whylen)
{
	struct usaged_bpf *skel = usaged_bpf__open();
	int err;

	if (!skel) {
		snprintf(why, whylen, "open BPF object: %s", strerror(errno));
		return errno ? errno : EINVAL;
	}
	err = bpf_map__set_max_entries(skel->maps.procs, opts->max_procs);
	if (err) {
		snprintf(why, whylen, "procs map of %u entries: %s", opts->max_procs,
			 strerror(-err));
		return -err;
	}
	skel->rodata->counters_mask = self->counters;
	skel->rodata->attach_ns = wb_mono_ns();
	/* The switch program with counter reads only when there is a counter to read. */
	bpf_program__set_autoload(skel->progs.on_switch, self->counters == 0);
	bpf_program__set_autoload(skel->progs.on_switch_counters, self->counters != 0);

	err = usaged_bpf__load(skel);
	if (err) {
		why_failed(why, whylen, "load BPF programs", -err);
		return -err;
	}
	for (int c = 0; c < USAGED_NCOUNTERS; c++) {
		if (!(self->counters & (1u << c)))
			continue;
		int mapfd = bpf_map__fd(counter_map(skel, c));
		for (int cpu = 0; cpu < self->ncpus; cpu++) {
			__u32 key = (__u32)cpu;
			int fd = self->perf_fds[c][cpu];
			if (fd >= 0 && bpf_map_update_elem(mapfd, &key, &fd, BPF_ANY) < 0) {
				err = errno;
				snprintf(why, whylen, "perf event array %s, CPU %d: %s",
					 usaged_counter_names[c], cpu, strerror(err));
				return err;
			}
		}
	}
	err = usaged_bpf__attach(skel);
	if (err) {
		why_failed(why, whylen, "attach BPF programs", -err);
		return -err;
	}
	fds[FD_PROCS] = bpf_map__fd(skel->maps.procs);
	fds[FD_CPUS] = bpf_map__fd(skel->maps.cpus);
	fds[FD_STATS] = bpf_map__fd(skel->maps.stats);
	for (int c = 0; c < USAGED_NCOUNTERS; c++)
		fds[FD_COUNTERS + c] = bpf_map__fd(counter_map(skel, c));
	const struct bpf_link *links[] = {skel->links.on_switch, skel->links.on_switch_counters,
					  skel->links.on_exit, skel->links.on_exec};
	*nlinks = 0;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (links[i])
			fds[NMAPFDS + (*nlinks)++] = bpf_link__fd(links[i]);
	for (int i = 0; i < NMAPFDS + (int)*nlinks; i++)
		if (fds[i] < 0) {
			snprintf(why, whylen, "BPF object: a map or link without an fd");
			return EBADF;
		}
	return 0;
}

/* The loader child: load, pass the fds to sock, exit. Never returns. */
static void loader_child(struct bpfsrc *self, const struct bpfsrc_opts *opts, int sock,
			 pid_t parent)
{
	struct loader_reply r = {0};
	int fds[NMAPFDS + MAX_LINKS];
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	sigset_t none;

	/* usaged blocks SIGTERM for its signalfd: a stop during the load ends the child too. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	prctl(PR_SET_NAME, "usaged-bpfload");

	r.err = load_attach(self, opts, fds, &r.nlinks, r.why, sizeof(r.why));
	if (r.err == 0) {
		size_t n = (NMAPFDS + r.nlinks) * sizeof(int);
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n);
		memcpy(CMSG_DATA(cm), fds, n);
	}
	_exit(sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(r) ? 0 : 1);
}

/*
 * Run the loader child and take its fds into self. Returns 0, or -1 with why
 * filled (the child's reason, or how it ended).
 */
static int load_in_child(struct bpfsrc *self, const struct bpfsrc_opts *opts, char *why,
			 size_t whylen)
{
	struct loader_reply r;
	int fds[NMAPFDS + MAX_LINKS], sv[2], status = 0, rc = -1;
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl)};
	ssize_t got;
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, whylen, "BPF loader: socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL); /* nothing buffered gets written twice */
	pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "BPF loader: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		loader_child(self, opts, sv[1], parent);
	}
	close(sv[1]);
	do
		got = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	int rerr = errno;
	close(sv[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;

	struct cmsghdr *cm = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	size_t nfds = 0;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
	}
	if (got < 0) {
		snprintf(why, whylen, "BPF loader: recvmsg: %s", strerror(rerr));
	} else if (got != (ssize_t)sizeof(r)) {
		if (WIFSIGNALED(status))
			snprintf(why, whylen, "BPF loader process killed by signal %d (%s)",
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			snprintf(why, whylen,
				 "BPF loader process exited with status %d before its reply",
				 WEXITSTATUS(status));
	} else if (r.err) {
		r.why[sizeof(r.why) - 1] = '\0';
		snprintf(why, whylen, "%s", r.why);
	} else if ((mh.msg_flags & MSG_CTRUNC) || r.nlinks < 1 || r.nlinks > MAX_LINKS ||
		   nfds != NMAPFDS + r.nlinks) {
		snprintf(why, whylen, "BPF loader: %zu fds passed, %u maps and %u links expected",
			 nfds, NMAPFDS, r.nlinks);
	} else {
		memcpy(self->map_fds, fds, sizeof(self->map_fds));
		memcpy(self->link_fds, fds + NMAPFDS, r.nlinks * sizeof(int));
		nfds = 0; /* self holds them now */
		rc = 0;
	}
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	return rc;
}

struct bpfsrc *bpfsrc_new(const struct bpfsrc_opts *opts, char *why, size_t whylen)
{
	struct bpfsrc *self = calloc(1, sizeof(*self));

	if (!self) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	for (int i = 0; i < NMAPFDS; i++)
		self->map_fds[i] = -1;
	for (int i = 0; i < MAX_LINKS; i++)
		self->link_fds[i] = -1;
	self->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	libbpf_set_print(libbpf_log);
	libbpf_first[0] = libbpf_verifier[0] = '\0';

	self->ncpus = libbpf_num_possible_cpus();
	if (self->ncpus <= 0) {
		snprintf(why, whylen, "cannot count the possible CPUs: %s", strerror(-self->ncpus));
		goto fail;
	}
	/* The counters are opened here, so that usaged reads them; the child inherits them. */
	if (opts->counters) {
		bool sw = getenv("WATTBUS_USAGED_TEST_SWCOUNTERS") != NULL;
		if (sw)
			log_warnx(
			    "test hook WATTBUS_USAGED_TEST_SWCOUNTERS: the cpu-clock software event stands in for every hardware counter");
		for (int c = 0; c < USAGED_NCOUNTERS; c++) {
			if (perf_open(self, c, sw) == 0)
				self->counters |= 1u << c;
			else
				log_info("hardware counter %s unavailable: perf_event_open: %s",
					 usaged_counter_names[c], strerror(errno));
		}
	}
	if (load_in_child(self, opts, why, whylen) < 0)
		goto fail;

	self->batch = BATCH;
	self->keys = calloc(self->batch, sizeof(*self->keys));
	self->vals = calloc(self->batch, sizeof(*self->vals));
	self->slots = calloc((size_t)self->ncpus, sizeof(*self->slots));
	self->slots2 = calloc((size_t)self->ncpus, sizeof(*self->slots2));
	self->statvals = calloc((size_t)self->ncpus, sizeof(*self->statvals));
	if (!self->keys || !self->vals || !self->slots || !self->slots2 || !self->statvals) {
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	return self;
fail:
	bpfsrc_destroy(&self);
	return NULL;
}

void bpfsrc_destroy(struct bpfsrc **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct bpfsrc *self = *self_p;
	/* The links first: closing them detaches the programs. */
	for (int i = 0; i < MAX_LINKS; i++)
		if (self->link_fds[i] >= 0)
			close(self->link_fds[i]);
	for (int i = 0; i < NMAPFDS; i++)
		if (self->map_fds[i] >= 0)
			close(self->map_fds[i]);
	for (int c = 0; c < USAGED_NCOUNTERS; c++) {
		for (int cpu = 0; self->perf_fds[c] && cpu < self->ncpus; cpu++)
			if (self->perf_fds[c][cpu] >= 0)
				close(self->perf_fds[c][cpu]);
		free(self->perf_fds[c]);
	}
	free(self->keys);
	free(self->vals);
	free(self->slots);
	free(self->slots2);
	free(self->statvals);
	free(self);
	*self_p = NULL;
}

unsigned bpfsrc_counters(const struct bpfsrc *self)
{
	return self->counters;
}

static uint64_t mono_ns(void)
{
	return wb_mono_ns(); /* the clock of bpf_ktime_get_ns() */
}

static void sample_of(struct bpfsrc *self, int fd, const struct usaged_key *k,
		      const struct usaged_proc *v, uint64_t now, struct procfs *pf,
		      struct usaged_sample *s)
{
	struct usaged_proc again;

	if (v->exit_ns && !v->dying) {
		/*
		 * The copy read cpu_ns before dying: read the entry once more, so that
		 * the last charge, made before dying dropped to 0, is in it.
		 */
		if (bpf_map_lookup_elem(fd, k, &again) == 0)
			v = &again;
	}
	memset(s, 0, sizeof(*s));
	s->pid = k->tgid;
	s->start_ns = k->start_ns;
	s->kcgroup_id = v->cgroup_id;
	s->cpu_ns = v->cpu_ns;
	memcpy(s->counters, v->counters, sizeof(s->counters));
	memcpy(s->comm, v->comm, sizeof(s->comm));
	s->comm[sizeof(s->comm) - 1] = '\0';
	if (v->exit_ns && v->dying && now > v->exit_ns + EXIT_STALL_NS &&
	    !procfs_alive(pf, k->tgid, k->start_ns)) {
		self->exits_forced++;
		log_rl(&self->rl, WB_LOG_WARN,
		       "bpf procs map: pid %" PRIu32
		       " exited %.1f s ago and was reaped with %" PRIu32
		       " threads not seen switching out for the last time; publishing it as exited",
		       k->tgid, (double)(now - v->exit_ns) / 1e9, v->dying);
		s->exited = true;
	} else {
		s->exited = v->exit_ns && !v->dying;
	}
}

/* The whole procs map into tab. Returns 0 when every entry was read. */
static int read_map(struct bpfsrc *self, struct ptab *tab, struct procfs *pf)
{
	int fd = self->map_fds[FD_PROCS];
	uint64_t now = mono_ns();
	struct usaged_sample s;
	__u32 in = 0, out = 0;
	bool first = true;

	self->entries = 0;
	while (!self->no_batch) {
		__u32 count = (__u32)self->batch;
		int err = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, self->keys, self->vals,
					       &count, NULL);
		int e = errno;
		if (err && e == ENOSPC && self->batch < (1u << 20)) {
			/* One bucket holds more than a batch: retry this step with room for it. */
			size_t batch = self->batch * 2;
			void *k = realloc(self->keys, batch * sizeof(*self->keys));
			if (k)
				self->keys = k;
			void *v = k ? realloc(self->vals, batch * sizeof(*self->vals)) : NULL;
			if (!v)
				return -1;
			self->vals = v;
			self->batch = batch;
			continue;
		}
		if (err && e != ENOENT) {
			if (first && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP)) {
				log_info(
				    "bpf map batch lookup unsupported (%s): walking keys instead",
				    strerror(e));
				self->no_batch = true;
				break;
			}
			log_rl(&self->rl, WB_LOG_WARN, "bpf procs map lookup_batch: %s",
			       strerror(e));
			return -1;
		}
		for (__u32 i = 0; i < count; i++) {
			sample_of(self, fd, &self->keys[i], &self->vals[i], now, pf, &s);
			ptab_put(tab, &s);
		}
		self->entries += count;
		if (err) /* ENOENT: no more entries */
			return 0;
		in = out;
		first = false;
	}

	struct usaged_key key, next;
	struct usaged_proc val;
	void *prev = NULL;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &val) < 0)
			continue; /* retired meanwhile */
		sample_of(self, fd, &key, &val, now, pf, &s);
		ptab_put(tab, &s);
		self->entries++;
	}
	return errno == ENOENT ? 0 : -1;
}

/*
 * A process is charged when it switches out, so one that has run for the
 * whole interval shows nothing yet: add each CPU's current run, from the
 * thread's run time now (/proc/<pid>/task/<tid>/schedstat) and at switch-in.
 * The slots are read before and after the map values; a CPU that switched
 * meanwhile is skipped, since the map then holds (or will hold) that run.
 */
static void read_running(struct bpfsrc *self, struct ptab *tab, struct procfs *pf)
{
	int cpus_fd = self->map_fds[FD_CPUS], procs_fd = self->map_fds[FD_PROCS];
	__u32 zero = 0;

	if (bpf_map_lookup_elem(cpus_fd, &zero, self->slots) < 0) {
		log_rl(&self->rl, WB_LOG_WARN, "bpf cpus map: %s", strerror(errno));
		return;
	}
	/* Per CPU: the process's map values, and separately its current run. */
	struct usaged_sample *run = calloc((size_t)self->ncpus, sizeof(*run));
	struct usaged_sample *delta = calloc((size_t)self->ncpus, sizeof(*delta));
	if (!run || !delta)
		goto out;
	for (int cpu = 0; cpu < self->ncpus; cpu++) {
		const struct usaged_cpu *slot = &self->slots[cpu];
		struct usaged_proc val;
		uint64_t runtime;
		if (!slot->switches || !slot->key.tgid)
			continue;
		/* The scheduler's count for the running thread, as the BPF side charges. */
		if (procfs_read_runtime(pf, slot->key.tgid, slot->tid, &runtime) < 0)
			continue; /* gone */
		/* Not in the map (no switch-out since usaged started, or a full map): ask /proc. */
		bool transient = bpf_map_lookup_elem(procs_fd, &slot->key, &val) < 0;
		if (transient) {
			memset(&val, 0, sizeof(val));
			struct usaged_sample p;
			if (procfs_read_pid(pf, slot->key.tgid, &p) == 0)
				memcpy(val.comm, p.comm, sizeof(val.comm));
		}
		sample_of(self, procs_fd, &slot->key, &val, mono_ns(), pf, &run[cpu]);
		run[cpu].transient = transient;
		delta[cpu].pid = slot->key.tgid;
		delta[cpu].cpu_ns = runtime > slot->runtime_ns ? runtime - slot->runtime_ns : 0;
		for (int c = 0; c < USAGED_NCOUNTERS; c++) {
			uint64_t v;
			if (!(self->counters & (1u << c)) || self->perf_fds[c][cpu] < 0 ||
			    !slot->counters[c] ||
			    read(self->perf_fds[c][cpu], &v, sizeof(v)) != sizeof(v))
				continue;
			delta[cpu].counters[c] = v > slot->counters[c] ? v - slot->counters[c] : 0;
		}
	}
	if (bpf_map_lookup_elem(cpus_fd, &zero, self->slots2) < 0)
		goto out;
	for (int cpu = 0; cpu < self->ncpus; cpu++)
		if (self->slots2[cpu].switches != self->slots[cpu].switches)
			run[cpu].pid = 0; /* switched meanwhile */
	for (int cpu = 0; cpu < self->ncpus; cpu++) {
		if (!run[cpu].pid)
			continue;
		struct usaged_sample s = run[cpu];
		/* Threads of one process on several CPUs: each adds its own run. */
		for (int o = cpu; o < self->ncpus; o++) {
			if (run[o].pid != s.pid || run[o].start_ns != s.start_ns)
				continue;
			s.cpu_ns += delta[o].cpu_ns;
			for (int c = 0; c < USAGED_NCOUNTERS; c++)
				s.counters[c] += delta[o].counters[c];
			run[o].pid = 0;
		}
		s.exited = false;
		ptab_put(tab, &s);
	}
out:
	free(run);
	free(delta);
}

int bpfsrc_scan(struct bpfsrc *self, struct ptab *tab, struct procfs *pf)
{
	int rc = read_map(self, tab, pf);
	read_running(self, tab, pf);
	return rc;
}

void bpfsrc_retire(void *arg, uint32_t pid, uint64_t start_ns)
{
	struct bpfsrc *self = arg;
	struct usaged_key key = {.tgid = pid, .pad = 0, .start_ns = start_ns};
	/* ENOENT: a process seen only running, never in the map. */
	if (bpf_map_delete_elem(self->map_fds[FD_PROCS], &key) < 0 && errno != ENOENT)
		log_rl(&self->rl, WB_LOG_WARN, "bpf procs map: delete pid %" PRIu32 ": %s", pid,
		       strerror(errno));
}

void bpfsrc_stats(struct bpfsrc *self, struct bpfsrc_stats *out)
{
	int fd = self->map_fds[FD_STATS];
	uint64_t sums[USAGED_NSTATS] = {0};
	for (__u32 k = 0; k < USAGED_NSTATS; k++) {
		if (bpf_map_lookup_elem(fd, &k, self->statvals) < 0)
			continue;
		for (int cpu = 0; cpu < self->ncpus; cpu++)
			sums[k] += self->statvals[cpu];
	}
	out->map_full = sums[USAGED_STAT_MAP_FULL];
	out->exits = sums[USAGED_STAT_EXITS];
	out->perf_fail = sums[USAGED_STAT_PERF_FAIL];
	out->unpaired = sums[USAGED_STAT_UNPAIRED];
	out->no_storage = sums[USAGED_STAT_NO_STORAGE];
	out->entries = self->entries;
	out->exits_forced = self->exits_forced;
}
