/*
 * wattbus doctor: what this machine offers a software power meter (RAPL, MSR,
 * hwmon meters, NVIDIA GPUs, BPF and BTF, perf counters, cgroups, kubepods), which
 * stages run now (their sockets, where top finds them, and their stat messages) and
 * the mode each stage runs or will run in, with the reason and the fix. It answers
 * for the user who runs it; `sudo wattbus doctor` shows what the systemd units get.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <jansson.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "daemon.h"
#include "../powerd/powerd.h"
#include "../usaged/usaged.h"

#define DR_TEXT 8192 /* above PATH_MAX: details quote paths */
#define DR_LIST 2048 /* a list of zones or meters inside a detail */

/* sys: where powerd reads its meters (its sysfs_root); kernel_sys: where usaged's kernel facts
 * are (BTF, the cgroup file systems, loaded modules), which powerd's sysfs_root does not move. */
struct roots {
	const char *sys;
	const char *proc;
	const char *dev;
	const char *kernel_sys;
};

/* One probe's outcome: a short state word, what was seen, how to do better. */
struct finding {
	const char *what;
	char state[32];
	char detail[DR_TEXT];
	char fix[DR_TEXT];
	json_t *extra; /* probe-specific facts for --json (owned) */
};

enum { F_RAPL, F_MSR, F_HWMON, F_GPU, F_BPF, F_PERF, F_CGROUP, F_KUBEPODS, F_COUNT };

#define DR_STAGES 6 /* powerd usaged alignd estimd exportd modeld */

/* A stage of the running pipeline: its socket in the runtime directory and its stat message. */
struct running {
	const char *stage;
	char sock[PATH_MAX + 16];
	enum ipc_state ipc;
	bool answered; /* a stat message came within the wait */
	char mode[32], version[32];
};

struct stage_mode {
	const char *stage;
	char mode[32];
	char reason[DR_TEXT];
	char fix[DR_TEXT];
};

struct doctor {
	struct roots r;
	struct finding f[F_COUNT];
	struct stage_mode s[4]; /* powerd, usaged, estimd, modeld */
	const char *modeld_store;
	const char *nvml_library;
	uint64_t wait_ns;
	bool json;	      /* --json */
	char rtdir[PATH_MAX]; /* where the sockets were found (or the first place looked) */
	char looked[2 * PATH_MAX + 8]; /* every place looked */
	bool any_running;
	struct running run[DR_STAGES];
	/* facts the stage summary needs */
	int rapl_zones, rapl_readable, rapl_root_only;
	bool bpf_usable, perf_usable;
	int hwmon_meters;
	char meter_vendor[16];
	/* powerd's own discovery on these roots: per source tried, its zones or why none */
	struct {
		const char *name;
		int zones;
		char list[DR_LIST];
		char why[PD_WHY_MAX];
	} pd[PD_SOURCES_MAX];
	unsigned npd;
};

/* snprintf into a fixed buffer, appending. */
static void cat(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	if (len + 1 >= size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* The first line of a small file, without its newline; -1 (errno) when unreadable. */
static int read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, (int)size, f)) {
		int e = ferror(f) ? errno : ENODATA;
		fclose(f);
		errno = e;
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Can this process read the file (a real read, as powerd does)? 0 or -1 (errno). */
static int try_read(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	return 0;
}

/* A path of the machine ("/sys/fs/cgroup") moved under --kernel-sysfs. */
static void sys_path(const struct roots *r, const char *abs, char *out, size_t size)
{
	if (!strncmp(abs, "/sys/", 5) || !strcmp(abs, "/sys"))
		snprintf(out, size, "%s%s", r->kernel_sys, abs + 4);
	else
		snprintf(out, size, "%s", abs);
}

/* ---- RAPL through powercap ---- */

/* "intel-rapl:0", "intel-rapl:0:1", "intel-rapl-mmio:0": the directories powerd reads. */
static bool is_zone_dir(const char *name)
{
	const char *colon = strchr(name, ':');
	if (!colon || colon == name || colon[1] < '0' || colon[1] > '9')
		return false;
	for (const char *p = colon + 1; *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == ':'))
			return false;
	return true;
}

static void probe_rapl(struct doctor *d)
{
	struct finding *f = &d->f[F_RAPL];
	char base[PATH_MAX], path[PATH_MAX + 300];
	snprintf(base, sizeof(base), "%s/class/powercap", d->r.sys);
	json_t *zones = json_array();
	f->extra = json_pack("{s:s, s:o}", "path", base, "zones", zones);
	DIR *dir = opendir(base);
	if (!dir) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail), "%s: %s", base, strerror(errno));
		snprintf(
		    f->fix, sizeof(f->fix),
		    "a kernel with CONFIG_INTEL_RAPL: `modprobe intel_rapl_msr` (Intel, and AMD since Linux 5.8); virtual machines have no RAPL");
		return;
	}
	struct dirent *de;
	char names[DR_LIST] = "";
	int first_errno = 0;
	while ((de = readdir(dir))) {
		if (!is_zone_dir(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/energy_uj", base, de->d_name);
		struct stat st;
		if (stat(path, &st) < 0)
			continue; /* a powercap zone without an energy counter (e.g. dtpm) */
		char name[64] = "?";
		char npath[PATH_MAX + 300];
		snprintf(npath, sizeof(npath), "%s/%s/name", base, de->d_name);
		read_line(npath, name, sizeof(name));
		bool readable = try_read(path) == 0;
		int err = readable ? 0 : errno;
		/* Root-owned and unreadable for group and others: the CVE-2020-8694 fix. */
		bool root_only = st.st_uid == 0 && !(st.st_mode & (S_IRGRP | S_IROTH));
		d->rapl_zones++;
		if (readable)
			d->rapl_readable++;
		else if (root_only && (err == EACCES || err == EPERM))
			d->rapl_root_only++;
		if (!readable && !first_errno)
			first_errno = err;
		cat(names, sizeof(names), "%s%s%s", names[0] ? ", " : "", name,
		    readable ? "" : " (unreadable)");
		json_array_append_new(
		    zones, json_pack("{s:s, s:s, s:b, s:s, s:i}", "dir", de->d_name, "name", name,
				     "readable", readable, "error", readable ? "" : strerror(err),
				     "mode", (int)(st.st_mode & 07777)));
	}
	closedir(dir);
	if (!d->rapl_zones) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail), "%s has no zone with an energy_uj counter",
			 base);
		snprintf(f->fix, sizeof(f->fix),
			 "`modprobe intel_rapl_msr`; virtual machines have no RAPL");
		return;
	}
	snprintf(f->detail, sizeof(f->detail), "%d zone%s in %s: %s", d->rapl_zones,
		 d->rapl_zones == 1 ? "" : "s", base, names);
	if (d->rapl_readable == d->rapl_zones) {
		snprintf(f->state, sizeof(f->state), "readable");
		return;
	}
	snprintf(f->state, sizeof(f->state), d->rapl_readable ? "partly" : "unreadable");
	if (d->rapl_root_only)
		snprintf(f->fix, sizeof(f->fix), "%s", rapl_permission_hint());
	else
		snprintf(f->fix, sizeof(f->fix), "energy_uj: %s; check its owner and mode",
			 strerror(first_errno));
}

/* ---- MSR ---- */

static bool module_loaded(const struct roots *r, const char *mod)
{
	char path[PATH_MAX], line[256];
	snprintf(path, sizeof(path), "%s/module/%s", r->kernel_sys, mod);
	if (access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof(path), "%s/modules", r->proc);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = strlen(mod);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, mod, n) && line[n] == ' ';
	fclose(f);
	return found;
}

static void cpu_vendor(const struct roots *r, char *out, size_t size)
{
	char path[PATH_MAX], line[256];
	snprintf(out, size, "unknown");
	snprintf(path, sizeof(path), "%s/cpuinfo", r->proc);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "vendor_id", 9)) {
			if (strstr(line, "GenuineIntel"))
				snprintf(out, size, "intel");
			else if (strstr(line, "AuthenticAMD") || strstr(line, "HygonGenuine"))
				snprintf(out, size, "amd");
			else
				snprintf(out, size, "other");
			break;
		}
	fclose(f);
}

static void probe_msr(struct doctor *d)
{
	struct finding *f = &d->f[F_MSR];
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cpu/0/msr", d->r.dev);
	cpu_vendor(&d->r, d->meter_vendor, sizeof(d->meter_vendor));
	bool loaded = module_loaded(&d->r, "msr");
	struct stat st;
	bool present = stat(path, &st) == 0;
	/* Opening is what needs privilege (CAP_SYS_RAWIO); reading would pick an MSR. */
	int fd = present ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	int err = errno;
	bool readable = fd >= 0;
	if (fd >= 0)
		close(fd);
	f->extra =
	    json_pack("{s:s, s:b, s:b, s:b, s:s}", "path", path, "present", present,
		      "module_loaded", loaded, "readable", readable, "cpu_vendor", d->meter_vendor);
	if (!present) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail), "%s: no such device; msr module %s", path,
			 loaded ? "loaded" : "not loaded");
		snprintf(f->fix, sizeof(f->fix), "%s",
			 loaded ? "check devtmpfs"
				: "`modprobe msr` (powerd's msr source; needs CAP_SYS_RAWIO)");
		return;
	}
	if (!readable) {
		snprintf(f->state, sizeof(f->state), "unreadable");
		snprintf(f->detail, sizeof(f->detail), "%s: %s", path, strerror(err));
		snprintf(
		    f->fix, sizeof(f->fix),
		    "reading MSRs needs root with CAP_SYS_RAWIO (wattbus-powerd.service drops it: see docs/systemd.md for the msr drop-in)");
		return;
	}
	bool rapl_cpu = !strcmp(d->meter_vendor, "intel") || !strcmp(d->meter_vendor, "amd");
	snprintf(f->state, sizeof(f->state), rapl_cpu ? "readable" : "no-rapl");
	snprintf(f->detail, sizeof(f->detail), "%s readable; CPU vendor %s%s", path,
		 d->meter_vendor, rapl_cpu ? "" : " (RAPL MSRs are Intel and AMD only)");
}

/* ---- hwmon ---- */

static bool is_meter_file(const char *n)
{
	const char *p;
	if (!strncmp(n, "power", 5))
		p = n + 5;
	else if (!strncmp(n, "energy", 6))
		p = n + 6;
	else
		return false;
	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return !strcmp(p, "_input") || (!strncmp(n, "power", 5) && !strcmp(p, "_average"));
}

static void probe_hwmon(struct doctor *d)
{
	struct finding *f = &d->f[F_HWMON];
	char base[PATH_MAX], path[PATH_MAX + 300];
	snprintf(base, sizeof(base), "%s/class/hwmon", d->r.sys);
	json_t *meters = json_array();
	f->extra = json_pack("{s:s, s:o}", "path", base, "meters", meters);
	DIR *dir = opendir(base);
	if (!dir) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail), "%s: %s", base, strerror(errno));
		return;
	}
	char names[DR_LIST] = "";
	int unreadable = 0, readable_meters = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		DIR *hw = opendir(path);
		if (!hw)
			continue;
		char chip[64] = "?", npath[PATH_MAX + 600];
		snprintf(npath, sizeof(npath), "%s/name", path);
		read_line(npath, chip, sizeof(chip));
		struct dirent *fe;
		while ((fe = readdir(hw))) {
			if (!is_meter_file(fe->d_name))
				continue;
			snprintf(npath, sizeof(npath), "%s/%s", path, fe->d_name);
			bool readable = try_read(npath) == 0;
			d->hwmon_meters++;
			if (readable)
				readable_meters++;
			else
				unreadable++;
			cat(names, sizeof(names), "%s%s/%s%s", names[0] ? ", " : "", chip,
			    fe->d_name, readable ? "" : " (unreadable)");
			json_array_append_new(meters, json_pack("{s:s, s:s, s:s, s:b}", "hwmon",
								de->d_name, "name", chip, "file",
								fe->d_name, "readable", readable));
		}
		closedir(hw);
	}
	closedir(dir);
	if (!d->hwmon_meters) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail),
			 "no power*_input, power*_average or energy*_input in %s", base);
		snprintf(
		    f->fix, sizeof(f->fix),
		    "server BMC/ACPI meters appear with `modprobe acpi_power_meter`; otherwise none");
		return;
	}
	snprintf(f->state, sizeof(f->state), readable_meters ? "readable" : "unreadable");
	snprintf(f->detail, sizeof(f->detail), "%d meter file%s: %s", d->hwmon_meters,
		 d->hwmon_meters == 1 ? "" : "s", names);
	if (unreadable)
		snprintf(f->fix, sizeof(f->fix),
			 "some meter files are not readable by uid %u; run powerd as root",
			 (unsigned)geteuid());
}

/* ---- BPF ---- */

static void kernel_release(const struct roots *r, char *out, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sys/kernel/osrelease", r->proc);
	if (read_line(path, out, size) == 0)
		return;
	struct utsname u;
	snprintf(out, size, "%s", uname(&u) == 0 ? u.release : "unknown");
}

static void probe_bpf(struct doctor *d)
{
	struct finding *f = &d->f[F_BPF];
	char rel[128], status[PATH_MAX];
	struct usaged_bpf_probe p;
	kernel_release(&d->r, rel, sizeof(rel));
	snprintf(status, sizeof(status), "%s/self/status", d->r.proc);
	d->bpf_usable = usaged_bpf_probe(d->r.kernel_sys, status, rel, &p);
	bool privileged = p.sys_admin || p.bpf_perfmon;
	f->extra = json_pack("{s:s, s:b, s:s, s:b, s:b}", "btf", p.btf, "btf_present", p.have_btf,
			     "kernel", rel, "cap_bpf_perfmon", p.bpf_perfmon, "cap_sys_admin",
			     p.sys_admin);
	snprintf(f->detail, sizeof(f->detail), "kernel %s; BTF %s %s; %s", rel, p.btf,
		 p.have_btf ? "present" : "missing",
		 privileged
		     ? (p.bpf_perfmon ? "CAP_BPF and CAP_PERFMON held" : "CAP_SYS_ADMIN held")
		     : "no CAP_BPF+CAP_PERFMON (not root)");
	snprintf(f->state, sizeof(f->state), "%s",
		 d->bpf_usable ? "usable"
		 : p.have_btf  ? "unprivileged"
			       : "no-btf");
	snprintf(f->fix, sizeof(f->fix), "%s", p.fix);
}

/* ---- perf counters ---- */

static void probe_perf(struct doctor *d)
{
	struct finding *f = &d->f[F_PERF];
	struct perf_event_attr attr = {
	    .type = PERF_TYPE_HARDWARE,
	    .size = sizeof(attr),
	    .config = PERF_COUNT_HW_CPU_CYCLES,
	    .disabled = 1,
	    .exclude_kernel = 1,
	    .exclude_hv = 1,
	};
	int fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	int err = errno;
	char path[PATH_MAX], paranoid[16] = "?";
	snprintf(path, sizeof(path), "%s/sys/kernel/perf_event_paranoid", d->r.proc);
	read_line(path, paranoid, sizeof(paranoid));
	f->extra = json_pack("{s:b, s:s, s:s}", "cycles", fd >= 0, "error",
			     fd >= 0 ? "" : strerror(err), "perf_event_paranoid", paranoid);
	if (fd >= 0) {
		close(fd);
		d->perf_usable = true;
		snprintf(f->state, sizeof(f->state), "usable");
		snprintf(f->detail, sizeof(f->detail),
			 "perf_event_open(cycles) works; perf_event_paranoid %s", paranoid);
		return;
	}
	snprintf(f->state, sizeof(f->state), "unavailable");
	snprintf(f->detail, sizeof(f->detail),
		 "perf_event_open(cycles): %s; perf_event_paranoid %s", strerror(err), paranoid);
	if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP)
		snprintf(
		    f->fix, sizeof(f->fix),
		    "no hardware PMU (usual in virtual machines: enable the vPMU); usaged counts CPU time only and estimd attributes by CPU time");
	else
		snprintf(
		    f->fix, sizeof(f->fix),
		    "CAP_PERFMON (wattbus-usaged.service has it) or `sysctl kernel.perf_event_paranoid=2`");
}

/* ---- cgroups and kubepods ---- */

static void probe_cgroup(struct doctor *d)
{
	struct finding *f = &d->f[F_CGROUP], *k = &d->f[F_KUBEPODS];
	char path[PATH_MAX], line[2048];
	char v2[PATH_MAX] = "";
	int nv1 = 0;
	json_t *v1 = json_array();
	snprintf(path, sizeof(path), "%s/self/mountinfo", d->r.proc);
	FILE *fp = fopen(path, "re");
	if (!fp) {
		snprintf(f->state, sizeof(f->state), "unknown");
		snprintf(f->detail, sizeof(f->detail), "%s: %s", path, strerror(errno));
		f->extra = json_pack("{s:o}", "v1", v1);
		snprintf(k->state, sizeof(k->state), "unknown");
		return;
	}
	while (fgets(line, sizeof(line), fp)) {
		/* "36 25 0:31 / /sys/fs/cgroup/cpu rw,... shared:15 - cgroup cgroup rw,cpu" */
		char mp[PATH_MAX], fstype[32];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(sep + 3, "%31s", fstype) != 1)
			continue;
		if (!strcmp(fstype, "cgroup2") && !v2[0])
			snprintf(v2, sizeof(v2), "%s", mp);
		else if (!strcmp(fstype, "cgroup")) {
			nv1++;
			json_array_append_new(v1, json_string(mp));
		}
	}
	fclose(fp);
	const char *version = v2[0] && nv1 ? "hybrid" : v2[0] ? "v2" : nv1 ? "v1" : "none";
	snprintf(f->state, sizeof(f->state), "%s", version);
	f->extra = json_pack("{s:s, s:s, s:o}", "version", version, "v2", v2, "v1", v1);
	if (!strcmp(version, "hybrid"))
		snprintf(f->detail, sizeof(f->detail), "v2 at %s and %d v1 hierarch%s", v2, nv1,
			 nv1 == 1 ? "y" : "ies");
	else if (!strcmp(version, "v2"))
		snprintf(f->detail, sizeof(f->detail), "unified hierarchy at %s", v2);
	else if (!strcmp(version, "v1"))
		snprintf(f->detail, sizeof(f->detail), "%d v1 hierarch%s, no cgroup2", nv1,
			 nv1 == 1 ? "y" : "ies");
	else
		snprintf(f->detail, sizeof(f->detail), "no cgroup file system mounted (%s)", path);
	if (!strcmp(version, "none"))
		snprintf(f->fix, sizeof(f->fix),
			 "usaged maps processes to containers through cgroupfs; mount it");

	/* kubepods: where the kubelet puts pods, at the top of a hierarchy (cgroupfs or systemd
	 * driver). */
	json_t *where = json_array();
	k->extra = json_pack("{s:o}", "paths", where);
	size_t n = json_array_size(v1);
	for (size_t i = 0; i <= n; i++) {
		const char *mp = i < n ? json_string_value(json_array_get(v1, i)) : v2;
		if (!mp[0])
			continue;
		static const char *const names[] = {"kubepods.slice", "kubepods"};
		for (size_t j = 0; j < 2; j++) {
			char dir[PATH_MAX], p[PATH_MAX + 32];
			sys_path(&d->r, mp, dir, sizeof(dir));
			snprintf(p, sizeof(p), "%s/%s", dir, names[j]);
			struct stat st;
			if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
				char shown[PATH_MAX + 32];
				snprintf(shown, sizeof(shown), "%s/%s", mp, names[j]);
				json_array_append_new(where, json_string(shown));
			}
		}
	}
	if (json_array_size(where)) {
		snprintf(k->state, sizeof(k->state), "present");
		snprintf(k->detail, sizeof(k->detail), "%s%s: pods get kepler_pod_* series",
			 json_string_value(json_array_get(where, 0)),
			 json_array_size(where) > 1 ? " (and more)" : "");
	} else {
		snprintf(k->state, sizeof(k->state), "absent");
		snprintf(
		    k->detail, sizeof(k->detail),
		    "no kubepods cgroup: not a Kubernetes node (containers and processes are still measured)");
	}
}

/* ---- powerd: its own sources' discovery, in its own order ---- */

/*
 * What `source = auto` would give on these roots, found by the very code powerd
 * runs (powerd/sources.c), so that doctor and powerd cannot disagree. Every
 * source is tried, not only up to the first usable one, to show what else is there.
 */
static void probe_powerd(struct doctor *d)
{
	struct cli_pd_roots r;
	struct cli_pd_try tries[PD_SOURCES_MAX];
	unsigned n = cli_pd_opts(&r, d->r.sys, d->r.dev, d->r.proc) < 0
			 ? 0
			 : cli_pd_discover(&r.o, NULL, tries, PD_SOURCES_MAX);
	for (unsigned i = 0; i < n; i++) {
		__typeof__(d->pd[0]) *p = &d->pd[d->npd++];
		p->name = tries[i].name;
		p->zones = tries[i].zones;
		snprintf(p->why, sizeof(p->why), "%s", tries[i].why);
		for (size_t k = 0; tries[i].set && k < tries[i].set->n; k++)
			cat(p->list, sizeof(p->list), "%s%s", k ? ", " : "",
			    tries[i].set->zones[k].name);
		pd_set_destroy(&tries[i].set);
	}
	cli_pd_opts_free(&r);
}

/* ---- NVIDIA GPUs: powerd's nvml source, as powerd opens it ---- */

static void probe_gpu_on(struct doctor *d, struct cli_pd_roots *r, bool opened);

static void probe_gpu(struct doctor *d)
{
	struct cli_pd_roots r;
	bool opened = cli_pd_opts(&r, d->r.sys, d->r.dev, d->r.proc) == 0 &&
		      cli_pd_set(&r, "nvml_library", d->nvml_library, "--nvml-library") == 0;
	probe_gpu_on(d, &r, opened);
	cli_pd_opts_free(&r);
}

/* r: powerd's options naming the NVML library; opened: whether they could be made */
static void probe_gpu_on(struct doctor *d, struct cli_pd_roots *r, bool opened)
{
	struct finding *f = &d->f[F_GPU];
	struct cli_pd_try t;
	json_t *gpus = json_array();
	f->extra = json_pack("{s:s, s:o}", "library", d->nvml_library, "gpus", gpus);
	if (!opened || cli_pd_discover(&r->o, "nvml", &t, 1) != 1) {
		snprintf(f->state, sizeof(f->state), "unknown");
		snprintf(f->detail, sizeof(f->detail), "out of memory");
		return;
	}
	if (!t.set) {
		snprintf(f->state, sizeof(f->state), "absent");
		snprintf(f->detail, sizeof(f->detail), "nvml: %s", t.why);
		return;
	}
	char list[DR_LIST] = "";
	for (size_t k = 0; k < t.set->n; k++) {
		const struct pd_zone *z = &t.set->zones[k];
		struct wb_power_zone pz = z->wire;
		pz.gpu_procs = NULL;
		if (z->src->annotate)
			z->src->annotate(z, &pz);
		free(pz.gpu_procs);
		/* a GPU's name and uuid come from its driver: printed as data (h5-names' escape) */
		cat(list, sizeof(list), "%s%s (%s, %s)", k ? ", " : "", z->name, pz.model, pz.uuid);
		json_array_append_new(gpus, json_pack("{s:s, s:s, s:s}", "zone", z->name, "model",
						      pz.model, "uuid", pz.uuid));
	}
	snprintf(f->state, sizeof(f->state), "present");
	snprintf(f->detail, sizeof(f->detail), "%zu GPU%s through NVML: %s", t.set->n,
		 t.set->n == 1 ? "" : "s", list);
	snprintf(
	    f->fix, sizeof(f->fix),
	    "powerd measures them only where nvml is named beside its CPU meter (source = rapl,nvml; auto never adds it)");
	pd_set_destroy(&t.set);
}

/* ---- the running pipeline: sockets where top looks, and their stat messages ---- */

static const char *const dr_stage_names[DR_STAGES] = {"powerd", "usaged",  "alignd",
						      "estimd", "exportd", "modeld"};

/*
 * The runtime directory that top would use (cli_runtime_dirs): the first one in which a stage's
 * socket has a listener, else the first one looked in. Then a subscriber on every listening socket
 * waits up to --wait for each stage's stat message (its mode and version).
 */
static void probe_running(struct doctor *d)
{
	char dirs[2][PATH_MAX];
	size_t ndirs = cli_runtime_dirs(dirs, 2);
	size_t pick = 0;
	d->looked[0] = '\0';
	for (size_t i = 0; i < ndirs; i++) {
		cat(d->looked, sizeof(d->looked), "%s%s", i ? " and " : "", dirs[i]);
		for (int s = 0; s < DR_STAGES && pick == 0 && !d->any_running; s++) {
			char path[PATH_MAX + 16];
			snprintf(path, sizeof(path), "%.*s/%s.sock", PATH_MAX - 1, dirs[i],
				 dr_stage_names[s]);
			if (cli_ipc_state(path) == IPC_LISTENING) {
				pick = i;
				d->any_running = true;
			}
		}
	}
	snprintf(d->rtdir, sizeof(d->rtdir), "%s", ndirs ? dirs[pick] : "");
	struct wb_sub *sub = NULL;
	unsigned listening = 0;
	for (int s = 0; s < DR_STAGES; s++) {
		struct running *r = &d->run[s];
		r->stage = dr_stage_names[s];
		snprintf(r->sock, sizeof(r->sock), "%.*s/%s.sock", PATH_MAX - 1, d->rtdir,
			 r->stage);
		r->ipc = cli_ipc_state(r->sock);
		if (r->ipc != IPC_LISTENING)
			continue;
		if (!sub && (!(sub = wb_sub_new(NULL)) || wb_sub_subscribe(sub, "stat/") < 0))
			break;
		char ep[PATH_MAX + 32];
		snprintf(ep, sizeof(ep), "ipc://%s", r->sock);
		if (wb_sub_connect(sub, ep) == 0)
			listening++;
	}
	unsigned answered = 0;
	uint64_t start = wb_mono_ns();
	struct wb_stats stats = {0};
	while (sub && answered < listening && !cli_interrupted()) {
		uint64_t spent = wb_mono_ns() - start;
		if (spent >= d->wait_ns)
			break;
		if (!wb_sub_wait(sub, (int)((d->wait_ns - spent) / 1000000) + 1))
			continue;
		struct wb_msg msg;
		struct wb_rx rx;
		struct wb_err err;
		if (wb_sub_try_recv(sub, &msg, &rx, &err, &stats) != 1)
			continue;
		for (int s = 0; msg.kind == WB_STAT && s < DR_STAGES; s++) {
			struct running *r = &d->run[s];
			if (r->ipc != IPC_LISTENING || r->answered ||
			    strcmp(msg.stat.stage, r->stage))
				continue;
			r->answered = true;
			snprintf(r->mode, sizeof(r->mode), "%s", msg.stat.mode);
			snprintf(r->version, sizeof(r->version), "%s", msg.stat.version);
			answered++;
		}
		wb_msg_clear(&msg);
	}
	wb_sub_destroy(&sub);
}

static const struct running *running_stage(const struct doctor *d, const char *stage)
{
	for (int s = 0; s < DR_STAGES; s++)
		if (!strcmp(d->run[s].stage, stage))
			return &d->run[s];
	return NULL;
}

static const char *running_state(const struct running *r)
{
	if (r->answered)
		return "running";
	if (r->ipc == IPC_LISTENING)
		return "silent";
	return r->ipc == IPC_STALE ? "stale" : "absent";
}

/* A running stage's own word for its mode overrides the prediction. */
static void running_mode(const struct doctor *d, struct stage_mode *m)
{
	const struct running *r = running_stage(d, m->stage);
	if (!r || !r->answered || !r->mode[0])
		return;
	char predicted[32], was[DR_TEXT];
	snprintf(predicted, sizeof(predicted), "%s", m->mode);
	snprintf(was, sizeof(was), "%s", m->reason);
	snprintf(m->mode, sizeof(m->mode), "%s", r->mode);
	snprintf(m->reason, sizeof(m->reason), "running: its stat message says mode %s", r->mode);
	if (strcmp(predicted, r->mode))
		cat(m->reason, sizeof(m->reason), "; doctor predicts %s here (%s)", predicted, was);
	m->fix[0] = '\0';
	if (!strcmp(m->stage, "powerd") && strstr(r->mode, "fake"))
		snprintf(
		    m->fix, sizeof(m->fix),
		    "its watts are SIMULATED from the CPU load (source = fake), not measured: for a demo only");
}

/* ---- which mode each stage takes ---- */

static void summarize(struct doctor *d)
{
	struct stage_mode *p = &d->s[0], *u = &d->s[1], *e = &d->s[2];
	p->stage = "powerd";
	u->stage = "usaged";
	e->stage = "estimd";
	snprintf(p->mode, sizeof(p->mode), "none");
	for (unsigned i = 0; i < d->npd; i++)
		if (d->pd[i].zones > 0) {
			snprintf(p->mode, sizeof(p->mode), "%s", d->pd[i].name);
			snprintf(p->reason, sizeof(p->reason), "%d zone%s: %s", d->pd[i].zones,
				 d->pd[i].zones == 1 ? "" : "s", d->pd[i].list);
			break;
		}
	if (!strcmp(p->mode, "none")) {
		/* powerd's own words for each source, as it logs them at start */
		for (unsigned i = 0; i < d->npd; i++)
			cat(p->reason, sizeof(p->reason), "%s%s: %s", i ? "; " : "", d->pd[i].name,
			    d->pd[i].why);
		if (d->rapl_root_only)
			snprintf(
			    p->fix, sizeof(p->fix),
			    "uid %u cannot read energy_uj; `sudo wattbus doctor` shows what wattbus-powerd.service (root) gets",
			    (unsigned)geteuid());
		else
			snprintf(
			    p->fix, sizeof(p->fix),
			    "none needed: the pipeline runs in model mode; a meter script can publish power messages (wattbus pub, or powerd's exec source)");
	}
	running_mode(d, p);
	bool metered = strcmp(p->mode, "none") != 0;

	if (d->bpf_usable) {
		snprintf(u->mode, sizeof(u->mode), "bpf");
		snprintf(u->reason, sizeof(u->reason),
			 "BTF and BPF privileges present; hardware counters %s",
			 d->perf_usable ? "available" : "unavailable (CPU time only)");
	} else {
		snprintf(u->mode, sizeof(u->mode), "procfs");
		snprintf(u->reason, sizeof(u->reason), "%s", d->f[F_BPF].detail);
		snprintf(u->fix, sizeof(u->fix), "%s", d->f[F_BPF].fix);
	}

	if (metered) {
		snprintf(e->mode, sizeof(e->mode), "measured");
		snprintf(
		    e->reason, sizeof(e->reason),
		    "powerd measures (%s): energy is split, not modelled; estimd also trains a model from it",
		    p->mode);
	} else {
		snprintf(e->mode, sizeof(e->mode), "model");
		snprintf(
		    e->reason, sizeof(e->reason),
		    "no meter: node energy comes from the power model (Kepler model-db weights)");
		snprintf(e->fix, sizeof(e->fix), "%s", p->fix);
	}
	running_mode(d, u);
	running_mode(d, e);
}

/* modeld: its socket in the runtime directory and what its store holds. */
static size_t count_glob(const char *pattern, int flags)
{
	glob_t g;
	size_t n = glob(pattern, flags, NULL, &g) == 0 ? g.gl_pathc : 0;
	globfree(&g);
	return n;
}

static void probe_modeld(struct doctor *d)
{
	struct stage_mode *m = &d->s[3];
	m->stage = "modeld";
	char pat[PATH_MAX + 64];
	struct stat st;
	const struct running *r = running_stage(d, "modeld");
	const char *sock = r->sock;
	bool running = r->ipc == IPC_LISTENING;
	snprintf(m->mode, sizeof m->mode, "%s", running ? "running" : "not running");
	cat(m->reason, sizeof m->reason, "%s %s; ", running ? "socket" : "no socket", sock);
	if (stat(d->modeld_store, &st) != 0 || !S_ISDIR(st.st_mode)) {
		cat(m->reason, sizeof m->reason, "no store at %s", d->modeld_store);
	} else if (access(d->modeld_store, R_OK | X_OK) != 0) {
		cat(m->reason, sizeof m->reason, "store %s not readable by uid %u", d->modeld_store,
		    (unsigned)geteuid());
	} else {
		snprintf(pat, sizeof pat, "%s/*/*/*/*/*/metadata.json", d->modeld_store);
		size_t models = count_glob(pat, 0);
		snprintf(pat, sizeof pat, "%s/*/", d->modeld_store);
		size_t pipes = count_glob(pat, GLOB_ONLYDIR);
		cat(m->reason, sizeof m->reason, "store %s: %zu model%s in %zu pipeline%s",
		    d->modeld_store, models, models == 1 ? "" : "s", pipes, pipes == 1 ? "" : "s");
	}
	if (!running)
		snprintf(
		    m->fix, sizeof m->fix,
		    "optional, on the one host that serves models: systemctl enable --now wattbus-modeld.service; meterless hosts then ask it (estimd --model_server)");
}

/* ---- output ---- */

static void print_text(const struct doctor *d)
{
	printf(
	    "wattbus doctor: what this machine offers (uid %u; `sudo wattbus doctor` shows what the units get)\n\n",
	    (unsigned)geteuid());
	static const char *const labels[F_COUNT] = {"RAPL", "MSR",  "hwmon",  "GPU",
						    "BPF",  "perf", "cgroup", "kubepods"};
	for (int i = 0; i < F_COUNT; i++) {
		const struct finding *f = &d->f[i];
		/* details quote sysfs names and files: data from drivers, escaped */
		printf("%-9s %-12s %s\n", labels[i], WB_VIS(f->state), WB_VIS(f->detail));
		if (f->fix[0])
			printf("%-9s %-12s fix: %s\n", "", "", WB_VIS(f->fix));
	}
	if (d->any_running)
		printf("\nrunning   sockets in %s\n", d->rtdir);
	else
		printf("\nrunning   no stage: no socket with a listener in %s\n", d->looked);
	for (int i = 0; d->any_running && i < DR_STAGES; i++) {
		const struct running *r = &d->run[i];
		const char *state = running_state(r);
		/* mode and version come from the bus: printed as data (h5-names' escape goes here)
		 */
		if (r->answered)
			printf("  %-7s %-18s mode %s, version %s\n", r->stage, state, r->mode,
			       r->version);
		else if (r->ipc == IPC_LISTENING)
			printf("  %-7s %-18s %s answers, but sent no stat message in %.1f s\n",
			       r->stage, state, r->sock, (double)d->wait_ns / 1e9);
		else
			printf("  %-7s %-18s %s\n", r->stage, state,
			       r->ipc == IPC_STALE ? "a socket left by a stopped process"
						   : "no socket");
	}
	printf("\nstages\n");
	for (int i = 0; i < 4; i++) {
		const struct stage_mode *s = &d->s[i];
		printf("  %-7s %-18s %s\n", s->stage,
		       strcmp(s->mode, "none") ? s->mode : "none (model mode)", WB_VIS(s->reason));
		if (s->fix[0])
			printf("  %-7s %-18s fix: %s\n", "", "", WB_VIS(s->fix));
	}
}

static int print_json(struct doctor *d)
{
	json_t *root = json_pack("{s:i, s:{s:s, s:s, s:s, s:s}}", "uid", (int)geteuid(), "roots",
				 "sysfs", d->r.sys, "proc", d->r.proc, "dev", d->r.dev,
				 "kernel_sysfs", d->r.kernel_sys);
	for (int i = 0; i < F_COUNT; i++) {
		struct finding *f = &d->f[i];
		json_t *o = f->extra ? f->extra : json_object();
		f->extra = NULL;
		json_object_set_new(o, "state", json_string(f->state));
		json_object_set_new(o, "detail", json_string(f->detail));
		json_object_set_new(o, "fix", json_string(f->fix));
		json_object_set_new(root, f->what, o);
	}
	json_t *stages = json_object();
	for (int i = 0; i < 4; i++)
		json_object_set_new(stages, d->s[i].stage,
				    json_pack("{s:s, s:s, s:s}", "mode", d->s[i].mode, "reason",
					      d->s[i].reason, "fix", d->s[i].fix));
	json_object_set_new(root, "stages", stages);
	json_t *run = json_object();
	for (int i = 0; i < DR_STAGES; i++) {
		const struct running *r = &d->run[i];
		json_object_set_new(run, r->stage,
				    json_pack("{s:s, s:s, s:s, s:s}", "state", running_state(r),
					      "socket", r->sock, "mode", r->mode, "version",
					      r->version));
	}
	json_object_set_new(root, "running",
			    json_pack("{s:s, s:s, s:o}", "dir", d->any_running ? d->rtdir : "",
				      "looked", d->looked, "stages", run));
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(root);
	if (!s)
		return 1;
	puts(s);
	free(s);
	return 0;
}

/* The flags go straight into the doctor's own fields. */
#define OFF(m) offsetof(struct doctor, m)
static const struct cli_flag doctor_flags[] = {
    CLI_SWITCH("json", 0, OFF(json), "one JSON object instead of text"),
    CLI_STR("sysfs-root", 0, OFF(r.sys), "/sys", "DIR",
	    "where powerd reads its meters (powerd's sysfs_root, make run's WATTBUS_SYSFS_ROOT)"),
    CLI_STR("kernel-sysfs", 0, OFF(r.kernel_sys), "/sys", "DIR",
	    "where BTF, the cgroup file systems and modules are (--sysfs-root leaves them)"),
    CLI_STR("proc-root", 0, OFF(r.proc), "/proc", "DIR", "where procfs is"),
    CLI_STR("dev-root", 0, OFF(r.dev), "/dev", "DIR", "where /dev is"),
    CLI_STR("modeld-store", 0, OFF(modeld_store), "/var/lib/wattbus/models", "DIR",
	    "wattbus-modeld's store"),
    CLI_STR("nvml-library", 0, OFF(nvml_library), "libnvidia-ml.so.1", "LIB",
	    "the NVML library powerd's nvml source loads"),
    /* above the default stat_interval, 5 s */
    CLI_DURATION("wait", 0, OFF(wait_ns), "6s", 0, 0, "DURATION",
		 "how long running stages get to send a stat message"),
};
static const struct cli_verb doctor_verb = {CLI_VERB("doctor", doctor_flags, struct doctor, 0, 0),
					    .synopsis = "[OPTIONS]"};

int cmd_doctor(int argc, char **argv)
{
	struct doctor *dp = calloc(1, sizeof(*dp)); /* large text buffers: not on the stack */
	if (!dp) {
		fprintf(stderr, "wattbus doctor: out of memory\n");
		return 1;
	}
	int first, rc = cli_parse(&doctor_verb, argc, argv, dp, &first);
	if (rc >= 0) {
		free(dp);
		return rc;
	}
	static const char *const what[F_COUNT] = {"rapl", "msr",  "hwmon",  "gpu",
						  "bpf",  "perf", "cgroup", "kubepods"};
	for (int i = 0; i < F_COUNT; i++)
		dp->f[i].what = what[i];
	probe_rapl(dp);
	probe_msr(dp);
	probe_hwmon(dp);
	probe_powerd(dp);
	probe_gpu(dp);
	probe_running(dp);
	probe_bpf(dp);
	probe_perf(dp);
	probe_cgroup(dp);
	summarize(dp);
	probe_modeld(dp);
	rc = 0;
	if (dp->json)
		rc = print_json(dp);
	else
		print_text(dp);
	for (int i = 0; i < F_COUNT; i++)
		json_decref(dp->f[i].extra);
	free(dp);
	return rc;
}
