/*
 * RAPL read straight from the model-specific registers (/dev/cpu/N/msr), for
 * machines whose powercap driver is missing. One CPU per package (and die) is
 * read; the register number is the file offset, so tests use plain files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpuinfo.h"
#include "powerd.h"

#define MSR_INTEL_RAPL_POWER_UNIT 0x606u
#define MSR_INTEL_PKG_ENERGY_STATUS 0x611u
#define MSR_INTEL_DRAM_ENERGY_STATUS 0x619u
#define MSR_INTEL_PP0_ENERGY_STATUS 0x639u
#define MSR_INTEL_PP1_ENERGY_STATUS 0x641u
#define MSR_INTEL_PLATFORM_ENERGY_STATUS 0x64du
#define MSR_AMD_RAPL_POWER_UNIT 0xc0010299u
#define MSR_AMD_PKG_ENERGY_STATUS 0xc001029bu

#define MSR_COUNTER_MODULUS (1ull << 32) /* energy-status registers count in their low 32 bits */

/* Its keys in [powerd]. */
struct msr_conf {
	char *msr_root; /* "/dev/cpu": <msr_root>/<cpu>/msr, register number = file offset */
	int64_t msr_dram_unit_nj; /* 0: as the kernel does (model quirks); else the DRAM unit */
};

int msr_cpu_id(const char *path, struct pd_cpu_id *id)
{
	*id = (struct pd_cpu_id){0};
	struct wb_cpuinfo_cpu *cpus;
	char err[256];
	int n = wb_cpuinfo_read(path, &cpus, err, sizeof(err));
	if (n <= 0 || !cpus[0].vendor_id[0]) {
		free(n > 0 ? cpus : NULL);
		return -1;
	}
	const char *v = cpus[0].vendor_id;
	if (!strcmp(v, "GenuineIntel"))
		id->vendor = PD_CPU_INTEL;
	else if (!strcmp(v, "AuthenticAMD") || !strcmp(v, "HygonGenuine"))
		id->vendor = PD_CPU_AMD;
	id->family = (unsigned)strtoul(cpus[0].cpu_family, NULL, 10);
	id->model = (unsigned)strtoul(cpus[0].model, NULL, 10);
	free(cpus);
	return 0;
}

/* Intel family 6 models whose DRAM domain counts in 15.3 uJ (drivers/powercap/intel_rapl_common.c).
 */
static bool intel_server_dram(unsigned model)
{
	static const unsigned models[] = {
	    0x3f, /* Haswell-X */
	    0x4f, /* Broadwell-X */
	    0x55, /* Skylake-X, Cascade Lake, Cooper Lake */
	    0x6a, /* Ice Lake-X */
	    0x6c, /* Ice Lake-D */
	    0x57, /* Xeon Phi KNL */
	    0x85, /* Xeon Phi KNM */
	    0x8f, /* Sapphire Rapids */
	    0xcf, /* Emerald Rapids */
	    0xad, /* Granite Rapids-X */
	    0xae, /* Granite Rapids-D */
	};
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (models[i] == model)
			return true;
	return false;
}

/* Models whose psys domain counts in joules (rapl_defaults_spr_server). */
static bool intel_psys_joules(unsigned model)
{
	return model == 0x8f || model == 0xcf || model == 0xad || model == 0xae;
}

void msr_units(const struct pd_cpu_id *id, unsigned esu, struct pd_unit *pkg, struct pd_unit *dram,
	       struct pd_unit *psys)
{
	*pkg = (struct pd_unit){.mul = 1000000, .div = 1ull << (esu & 31)};
	*dram = *pkg;
	*psys = *pkg;
	if (id->vendor == PD_CPU_INTEL && id->family == 6) {
		if (intel_server_dram(id->model))
			*dram = (struct pd_unit){.mul = 153, .div = 10};
		if (intel_psys_joules(id->model))
			*psys = (struct pd_unit){.mul = 1000000, .div = 1};
	}
}

static int msr_pread(int fd, uint32_t reg, uint64_t *value)
{
	ssize_t n = pread(fd, value, sizeof(*value), (off_t)reg);
	if (n == (ssize_t)sizeof(*value))
		return 0;
	if (n >= 0)
		errno = EIO; /* past the end of a file layout: the register does not exist */
	return -1;
}

/* A CPU to read each package (and die) from. */
struct msr_pkg {
	int cpu;
	unsigned pkg, die;
};

static int msr_pkg_cmp(const void *a, const void *b)
{
	const struct msr_pkg *x = a, *y = b;
	if (x->pkg != y->pkg)
		return x->pkg < y->pkg ? -1 : 1;
	return x->die < y->die ? -1 : x->die > y->die;
}

/* The lowest CPU of every package and die, from sysfs topology. Returns the count; *multi_die when
 * dies matter. */
static size_t msr_packages(const struct pd_opts *opts, struct msr_pkg *out, size_t max,
			   bool *multi_die)
{
	char base[PD_PATH_MAX];
	snprintf(base, sizeof(base), "%s/devices/system/cpu", opts->sysfs_root);
	size_t n = 0;
	*multi_die = false;
	DIR *dir = opendir(base);
	if (!dir)
		return 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		unsigned cpu;
		int len = 0;
		if (sscanf(de->d_name, "cpu%u%n", &cpu, &len) != 1 || de->d_name[len])
			continue;
		char path[PD_PATH_MAX + 64], err[PD_PATH_MAX + 128];
		uint64_t pkg, die = 0;
		pd_fmt(path, sizeof(path), "%s/%s/topology/physical_package_id", base, de->d_name);
		if (pd_read_u64(path, &pkg, err, sizeof(err)) != PD_READ_OK || pkg > 65535)
			continue; /* offline CPU */
		pd_fmt(path, sizeof(path), "%s/%s/topology/die_id", base, de->d_name);
		if (pd_read_u64(path, &die, err, sizeof(err)) != PD_READ_OK || die > 65535)
			die = 0;
		if (die)
			*multi_die = true;
		size_t i;
		for (i = 0; i < n; i++)
			if (out[i].pkg == pkg && out[i].die == die)
				break;
		if (i == n) {
			if (n == max)
				continue;
			out[n++] = (struct msr_pkg){
			    .cpu = (int)cpu, .pkg = (unsigned)pkg, .die = (unsigned)die};
		} else if ((int)cpu < out[i].cpu) {
			out[i].cpu = (int)cpu;
		}
	}
	closedir(dir);
	qsort(out, n, sizeof(*out), msr_pkg_cmp);
	return n;
}

static void msr_hint(int errnum, char *buf, size_t size)
{
	if (errnum == ENOENT || errnum == ENODEV || errnum == ENXIO)
		snprintf(buf, size, " (load the msr driver: modprobe msr)");
	else if (errnum == EACCES || errnum == EPERM)
		snprintf(buf, size,
			 " (reading MSRs needs root with CAP_SYS_RAWIO; run powerd as root)");
	else
		buf[0] = '\0';
}

static int msr_add(struct pd_set *set, const struct pd_opts *opts, int fd, const char *dev,
		   uint32_t reg, const char *kind, const struct msr_pkg *p, bool multi_die,
		   struct pd_unit unit, bool must)
{
	uint64_t v;
	if (msr_pread(fd, reg, &v) < 0) {
		if (must)
			log_warnx("msr: %s: register 0x%x: %s", dev, reg, strerror(errno));
		else
			log_debug("msr: %s: no %s register 0x%x: %s", dev, kind, reg,
				  strerror(errno));
		return 0;
	}
	if (!must && (v & 0xffffffffu) == 0) {
		log_debug("msr: %s: %s register 0x%x reads 0: this CPU does not have it", dev, kind,
			  reg);
		return 0;
	}
	struct pd_zone z;
	pd_zone_init(&z, &msr_source, kind, p->pkg);
	if (!strcmp(kind, "psys"))
		snprintf(z.name, sizeof(z.name), "psys");
	else if (multi_die)
		snprintf(z.name, sizeof(z.name), "%s-%u-die-%u", kind, p->pkg, p->die);
	else
		snprintf(z.name, sizeof(z.name), "%s-%u", kind, p->pkg);
	snprintf(z.path, sizeof(z.path), "%.240s:0x%x", dev, reg);
	snprintf(z.file, sizeof(z.file), "%s", dev);
	z.reg = reg;
	/* dup() would clear close-on-exec and leak the MSR into exec children */
	z.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (z.fd < 0) {
		log_warn("msr: %s", dev);
		return 0;
	}
	counter_init(&z.ctr, MSR_COUNTER_MODULUS, unit.mul, unit.div,
		     (uint64_t)(opts->max_power_w * 1e6));
	if (pd_set_add(set, &z) < 0) {
		close(z.fd);
		return 0;
	}
	return 1;
}

int msr_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	struct msr_pkg pkgs[64];
	bool multi_die = false;
	size_t npkg = msr_packages(opts, pkgs, sizeof(pkgs) / sizeof(pkgs[0]), &multi_die);
	if (npkg == 0) {
		log_info(
		    "msr: no CPU topology under %s/devices/system/cpu; reading package 0 from cpu 0",
		    opts->sysfs_root);
		pkgs[0] = (struct msr_pkg){.cpu = 0};
		npkg = 1;
	}
	struct pd_cpu_id id;
	if (msr_cpu_id(opts->cpuinfo_path, &id) < 0)
		id = (struct pd_cpu_id){0};
	const struct msr_conf *conf = pd_source_conf(opts, &msr_source);
	int added = 0;
	bool psys_done = false;
	for (size_t i = 0; i < npkg; i++) {
		const struct msr_pkg *p = &pkgs[i];
		char dev[PD_PATH_MAX], hint[128];
		snprintf(dev, sizeof(dev), "%s/%d/msr", conf->msr_root, p->cpu);
		int fd = open(dev, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			msr_hint(e, hint, sizeof(hint));
			if (!added)
				snprintf(why, whylen, "%s: %s%s", dev, strerror(e), hint);
			log_debug("msr: %s: %s%s", dev, strerror(e), hint);
			continue;
		}
		/* Which register set: cpuinfo's vendor first, then whichever unit register reads.
		 */
		uint64_t unit;
		enum pd_cpu_vendor vendor = PD_CPU_UNKNOWN;
		uint32_t first =
		    id.vendor == PD_CPU_AMD ? MSR_AMD_RAPL_POWER_UNIT : MSR_INTEL_RAPL_POWER_UNIT;
		uint32_t second = first == MSR_AMD_RAPL_POWER_UNIT ? MSR_INTEL_RAPL_POWER_UNIT
								   : MSR_AMD_RAPL_POWER_UNIT;
		/* A unit register reading 0 (ESU 0: 1 J per tick) is taken as absent. */
		int e = EIO;
		for (int k = 0; k < 2 && vendor == PD_CPU_UNKNOWN; k++) {
			uint32_t reg = k ? second : first;
			if (msr_pread(fd, reg, &unit) < 0)
				e = errno;
			else if (unit & 0x1f1f)
				vendor = reg == MSR_AMD_RAPL_POWER_UNIT ? PD_CPU_AMD : PD_CPU_INTEL;
		}
		if (vendor == PD_CPU_UNKNOWN) {
			if (!added)
				snprintf(
				    why, whylen,
				    "%s: neither the Intel (0x606) nor the AMD (0xc0010299) RAPL power-unit register reads (%s): no RAPL on this CPU",
				    dev, strerror(e));
			close(fd);
			continue;
		}
		struct pd_cpu_id cid = id;
		if (cid.vendor != vendor)
			cid = (struct pd_cpu_id){
			    .vendor = vendor}; /* cpuinfo disagrees: no model quirks */
		unsigned esu = (unsigned)(unit >> 8) & 0x1f;
		struct pd_unit u_pkg, u_dram, u_psys;
		msr_units(&cid, esu, &u_pkg, &u_dram, &u_psys);
		if (conf->msr_dram_unit_nj)
			u_dram =
			    (struct pd_unit){.mul = (uint64_t)conf->msr_dram_unit_nj, .div = 1000};
		int before = added;
		if (vendor == PD_CPU_INTEL) {
			added += msr_add(set, opts, fd, dev, MSR_INTEL_PKG_ENERGY_STATUS, "package",
					 p, multi_die, u_pkg, true);
			added += msr_add(set, opts, fd, dev, MSR_INTEL_PP0_ENERGY_STATUS, "core", p,
					 multi_die, u_pkg, false);
			added += msr_add(set, opts, fd, dev, MSR_INTEL_PP1_ENERGY_STATUS, "uncore",
					 p, multi_die, u_pkg, false);
			added += msr_add(set, opts, fd, dev, MSR_INTEL_DRAM_ENERGY_STATUS, "dram",
					 p, multi_die, u_dram, false);
			if (!psys_done) { /* psys is platform-wide: read once */
				int k =
				    msr_add(set, opts, fd, dev, MSR_INTEL_PLATFORM_ENERGY_STATUS,
					    "psys", p, multi_die, u_psys, false);
				psys_done = k > 0;
				added += k;
			}
		} else {
			/* AMD's per-core counters (0xc001029a) are left out: one zone per core
			 * would exceed the bus limit on large parts. */
			added += msr_add(set, opts, fd, dev, MSR_AMD_PKG_ENERGY_STATUS, "package",
					 p, multi_die, u_pkg, true);
		}
		log_info("msr: %s: %s RAPL, energy unit 1/2^%u J, %d zones", dev,
			 vendor == PD_CPU_INTEL ? "Intel" : "AMD", esu, added - before);
		close(fd);
	}
	if (added == 0 && !why[0])
		snprintf(why, whylen, "no readable RAPL energy-status register under %s",
			 conf->msr_root);
	return added;
}

enum pd_read_err msr_read(struct pd_zone *z, uint64_t *raw, char *err, size_t errlen)
{
	uint64_t v;
	if (msr_pread(z->fd, z->reg, &v) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", z->path, strerror(e));
		errno = e;
		return PD_READ_IO;
	}
	*raw = v & 0xffffffffu;
	return PD_READ_OK;
}

void msr_close(struct pd_zone *z)
{
	if (z->fd >= 0)
		close(z->fd);
	z->fd = -1;
}

#define OFF(f) offsetof(struct msr_conf, f)
static const struct wb_conf_key msr_keys[] = {
    {"msr_root", WB_CONF_STR | WB_CONF_RESTART, OFF(msr_root), "/dev/cpu", 0, 0, NULL,
     "directory of the msr devices, MSR_ROOT/CPU/msr (register number = file offset)"},
    {"msr_dram_unit_nj", WB_CONF_INT | WB_CONF_RESTART, OFF(msr_dram_unit_nj), "0", 0, 1e9, NULL,
     "DRAM energy unit in nJ for the msr source; 0: as the kernel (15300 on Xeon servers, else the power-unit register)"},
};
#undef OFF

const struct pd_source msr_source = {
    .name = "msr",
    .in_auto = true,
    .keys = msr_keys,
    .nkeys = sizeof(msr_keys) / sizeof(msr_keys[0]),
    .conf_size = sizeof(struct msr_conf),
    .discover = msr_discover,
    .read = msr_read,
    .close_zone = msr_close,
};
