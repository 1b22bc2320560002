/*
 * RAPL through the powercap sysfs tree: intel-rapl:N packages (and dies),
 * their intel-rapl:N:M subzones (core, uncore, dram) by their `name` file,
 * psys, intel-rapl-mmio, and AMD's zones, which the same driver exposes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "powerd.h"

struct rapl_entry {
	char dir[64];  /* "intel-rapl:0:1" */
	char type[48]; /* "intel-rapl" */
	unsigned n;    /* zone number */
	int m;	       /* subzone number, -1 for a top-level zone */
};

/* "intel-rapl:1:0" -> type "intel-rapl", n 1, m 0. Returns 0, or -1 when it is not a zone
 * directory. */
static int rapl_parse_entry(const char *dname, struct rapl_entry *e)
{
	const char *colon = strchr(dname, ':');
	if (!colon || colon == dname || (size_t)(colon - dname) >= sizeof(e->type) ||
	    strlen(dname) >= sizeof(e->dir))
		return -1;
	char *end;
	const char *p = colon + 1;
	if (*p < '0' || *p > '9')
		return -1;
	unsigned long n = strtoul(p, &end, 10);
	long m = -1;
	if (*end == ':') {
		p = end + 1;
		if (*p < '0' || *p > '9')
			return -1;
		m = (long)strtoul(p, &end, 10);
	}
	if (*end != '\0' || n > 65535 || m > 65535)
		return -1;
	snprintf(e->dir, sizeof(e->dir), "%s", dname);
	snprintf(e->type, sizeof(e->type), "%.*s", (int)(colon - dname), dname);
	e->n = (unsigned)n;
	e->m = (int)m;
	return 0;
}

/* intel-rapl before intel-rapl-mmio and others, so that the MSR-backed zone wins a duplicate. */
static int rapl_entry_cmp(const void *a, const void *b)
{
	const struct rapl_entry *x = a, *y = b;
	int rx = strcmp(x->type, "intel-rapl") != 0, ry = strcmp(y->type, "intel-rapl") != 0;
	if (rx != ry)
		return rx - ry;
	int c = strcmp(x->type, y->type);
	if (c)
		return c;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->m - y->m;
}

int rapl_package_index(const char *name, int *die)
{
	unsigned pkg, d;
	int len = 0;
	*die = -1;
	if (sscanf(name, "package-%u%n", &pkg, &len) == 1 && name[len] == '\0')
		return pkg <= 65535 ? (int)pkg : -1;
	if (sscanf(name, "package-%u-die-%u%n", &pkg, &d, &len) == 2 && name[len] == '\0' &&
	    pkg <= 65535) {
		*die = (int)d;
		return (int)pkg;
	}
	return -1;
}

static void sanitize(const char *in, char *out, size_t size)
{
	size_t j = 0;
	for (size_t i = 0; in[i] && j + 1 < size; i++) {
		char ch = in[i];
		out[j++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				   (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'
			       ? ch
			       : '_';
	}
	out[j] = '\0';
	if (j == 0)
		snprintf(out, size, "zone");
}

/* The socket (and die) of the zone a subzone belongs to, from the parent's name file. */
static int rapl_parent_package(const char *base, const struct rapl_entry *e, int *die)
{
	char path[PD_PATH_MAX], name[64];
	pd_fmt(path, sizeof(path), "%s/%s:%u/name", base, e->type, e->n);
	if (pd_read_text(path, name, sizeof(name)) == 0) {
		int pkg = rapl_package_index(name, die);
		if (pkg >= 0)
			return pkg;
	}
	*die = -1;
	return (int)e->n;
}

const char *rapl_permission_hint(void)
{
	/* One advice for powerd's log and wattbus doctor alike. */
	return "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694, the PLATYPUS power side channel): run powerd as root, as wattbus-powerd.service does (uid 0, no capabilities); granting a group read access (a udev rule SUBSYSTEM==\"powercap\", ACTION==\"add\", RUN+=\"/bin/chgrp wattbus /sys%p/energy_uj\", RUN+=\"/bin/chmod g+r /sys%p/energy_uj\") works but reopens the side channel to that group";
}

int rapl_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	char base[PD_PATH_MAX];
	snprintf(base, sizeof(base), "%s/class/powercap", opts->sysfs_root);
	DIR *dir = opendir(base);
	if (!dir) {
		snprintf(
		    why, whylen,
		    "%s: %s (no powercap: a kernel without CONFIG_INTEL_RAPL, the intel_rapl_msr module not loaded, or a virtual machine)",
		    base, strerror(errno));
		return 0;
	}
	struct rapl_entry *ents = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		struct rapl_entry e;
		if (rapl_parse_entry(de->d_name, &e) < 0)
			continue;
		if (wb_grow(&ents, &cap, n + 1, sizeof(*ents), 16) < 0)
			break;
		ents[n++] = e;
	}
	closedir(dir);
	if (n)
		qsort(ents, n, sizeof(*ents), rapl_entry_cmp);

	int added = 0, denied = 0, broken = 0;
	unsigned npsys = 0;
	char first_err[PD_PATH_MAX + 128] = "";
	for (size_t i = 0; i < n; i++) {
		const struct rapl_entry *e = &ents[i];
		char zdir[PD_PATH_MAX], path[PD_PATH_MAX + 32], name[64], err[PD_PATH_MAX + 128];
		pd_fmt(zdir, sizeof(zdir), "%s/%s", base, e->dir);
		snprintf(path, sizeof(path), "%s/name", zdir);
		if (pd_read_text(path, name, sizeof(name)) < 0 || !name[0]) {
			log_debug("rapl: %s: no name, skipped", zdir);
			continue;
		}
		snprintf(path, sizeof(path), "%s/energy_uj", zdir);
		if (access(path, F_OK) < 0)
			continue; /* a zone without an energy counter (power limits only) */
		uint64_t raw;
		enum pd_read_err rc = pd_read_u64(path, &raw, err, sizeof(err));
		if (rc != PD_READ_OK) {
			bool perm = rc == PD_READ_IO && (errno == EACCES || errno == EPERM);
			if (perm)
				denied++;
			else
				broken++;
			if (!first_err[0])
				snprintf(first_err, sizeof(first_err), "%s", err);
			log_warnx("rapl: %s (zone %s left out)", err, name);
			continue;
		}

		struct pd_zone z;
		int die = -1;
		int pkg = rapl_package_index(name, &die);
		if (pkg >= 0) {
			pd_zone_init(&z, &rapl_source, "package", (unsigned)pkg);
			snprintf(z.name, sizeof(z.name), "%s", name);
		} else if (!strcmp(name, "core") || !strcmp(name, "uncore") ||
			   !strcmp(name, "dram")) {
			pkg = e->m >= 0 ? rapl_parent_package(base, e, &die) : (int)e->n;
			pd_zone_init(&z, &rapl_source, name, (unsigned)pkg);
			if (die >= 0)
				pd_fmt(z.name, sizeof(z.name), "%s-%d-die-%d", name, pkg, die);
			else
				pd_fmt(z.name, sizeof(z.name), "%s-%d", name, pkg);
		} else if (!strcmp(name, "psys")) {
			pd_zone_init(&z, &rapl_source, "psys", npsys);
			if (npsys)
				snprintf(z.name, sizeof(z.name), "psys-%u", npsys);
			else
				snprintf(z.name, sizeof(z.name), "psys");
			npsys++;
		} else {
			pd_zone_init(&z, &rapl_source, "other", e->n);
			sanitize(name, z.name, sizeof(z.name));
		}
		if (strcmp(e->type, "intel-rapl") != 0) {
			struct pd_zone *dup = pd_set_find(set, z.name);
			if (dup && dup->src == &rapl_source) {
				/* intel-rapl-mmio reads the same energy-status register as the MSR
				 * interface */
				log_info(
				    "rapl: %s (%s) measures the same as %s; not published twice",
				    zdir, name, dup->path);
				continue;
			}
		}
		pd_fmt(z.path, sizeof(z.path), "%s", zdir);
		pd_fmt(z.file, sizeof(z.file), "%s", path);
		uint64_t max_range = 0;
		snprintf(path, sizeof(path), "%s/max_energy_range_uj", zdir);
		if (pd_read_u64(path, &max_range, err, sizeof(err)) != PD_READ_OK ||
		    max_range == 0 || max_range == UINT64_MAX) {
			log_warnx(
			    "rapl: %s: no usable max_energy_range_uj (%s); a wrap of this counter will look like a restart and lose one interval",
			    zdir, max_range ? "unusable value" : err);
			max_range = 0;
		}
		uint64_t max_uw = (uint64_t)(opts->max_power_w * 1e6);
		/* The counter takes every value 0..max_energy_range_uj, so it wraps modulo range
		 * + 1. */
		counter_init(&z.ctr, max_range ? max_range + 1 : 0, 1, 1, max_uw);
		if (pd_set_add(set, &z) >= 0)
			added++;
	}
	free(ents);
	if (added && denied)
		log_warnx("rapl: %d zone%s left out: %s", denied, denied == 1 ? "" : "s",
			  rapl_permission_hint());
	if (added == 0) {
		if (denied)
			snprintf(why, whylen, "%s: %s", first_err, rapl_permission_hint());
		else if (broken)
			snprintf(why, whylen, "no readable zone under %s: %s", base, first_err);
		else
			snprintf(
			    why, whylen,
			    "no zone with energy_uj under %s (no RAPL on this CPU, intel_rapl_msr not loaded, or a virtual machine)",
			    base);
	}
	return added;
}

const struct pd_source rapl_source = {
    .name = "rapl",
    .in_auto = true,
    .discover = rapl_discover,
    .read = pd_zone_read_file,
    .close_zone = pd_zone_close_file,
    .permission_hint = rapl_permission_hint,
};
