/*
 * Fake sysfs and msr trees for powerd's unit tests: a temporary directory
 * with files written the way the kernel lays them out.
 */
#ifndef TEST_POWERD_FAKE_H
#define TEST_POWERD_FAKE_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../powerd/powerd.h"
#include "unit.h"

static char fake_root[256];

static __attribute__((unused)) void fake_mkdirs(const char *path)
{
	char tmp[PD_PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(tmp, 0755);
			*p = '/';
		}
	mkdir(tmp, 0755);
}

/* Write text to fake_root/rel (directories created); the file is replaced atomically. */
static __attribute__((unused)) void fake_write(const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static __attribute__((unused)) void fake_write(const char *rel, const char *fmt, ...)
{
	char path[PD_PATH_MAX], tmp[PD_PATH_MAX + 8];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	char dir[PD_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	fake_mkdirs(dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "fake_write %s: %s\n", tmp, strerror(errno));
		exit(99);
	}
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	rename(tmp, path);
}

static __attribute__((unused)) void fake_remove(const char *rel)
{
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	unlink(path);
}

static __attribute__((unused)) int fake_rm_cb(const char *path, const struct stat *st, int flag,
					      struct FTW *ftw)
{
	return remove(path);
}

/* A fresh empty root; the previous one is removed. */
static const char *fake_new(void)
{
	if (fake_root[0])
		nftw(fake_root, fake_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	unit_tmp(fake_root, sizeof(fake_root), "wb-powerd-unit-XXXXXX");
	if (!mkdtemp(fake_root)) {
		perror("mkdtemp");
		exit(99);
	}
	return fake_root;
}

static __attribute__((unused)) void fake_cleanup(void)
{
	if (fake_root[0])
		nftw(fake_root, fake_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	fake_root[0] = '\0';
}

/* A powercap zone: name, energy_uj and max_energy_range_uj. */
static __attribute__((unused)) void fake_rapl_zone(const char *dir, const char *name,
						   uint64_t energy_uj, uint64_t range_uj)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "sys/class/powercap/%s/name", dir);
	fake_write(rel, "%s\n", name);
	snprintf(rel, sizeof(rel), "sys/class/powercap/%s/energy_uj", dir);
	fake_write(rel, "%llu\n", (unsigned long long)energy_uj);
	snprintf(rel, sizeof(rel), "sys/class/powercap/%s/max_energy_range_uj", dir);
	fake_write(rel, "%llu\n", (unsigned long long)range_uj);
}

static __attribute__((unused)) void fake_rapl_energy(const char *dir, uint64_t energy_uj)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "sys/class/powercap/%s/energy_uj", dir);
	fake_write(rel, "%llu\n", (unsigned long long)energy_uj);
}

/* Write a 64-bit register at its offset in fake_root/rel (a file laid out like /dev/cpu/N/msr). */
static __attribute__((unused)) void fake_msr(const char *rel, uint32_t reg, uint64_t value)
{
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	char dir[PD_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	fake_mkdirs(dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || pwrite(fd, &value, sizeof(value), (off_t)reg) != (ssize_t)sizeof(value)) {
		fprintf(stderr, "fake_msr %s: %s\n", path, strerror(errno));
		exit(99);
	}
	close(fd);
}

/* The [powerd] settings of the options fake_opts gave last (powerd's key table, its defaults). */
static void *fake_conf;

/* Set one of [powerd]'s keys (a source's too) in the options fake_opts gave last. */
static __attribute__((unused)) void fake_set(const char *key, const char *value)
{
	char err[WB_CONF_ERR_MAX];
	if (pd_conf_set(fake_conf, key, value, err, sizeof(err)) < 0) {
		fprintf(stderr, "fake_set: %s\n", err);
		exit(99);
	}
}

/* Options for a fake root, as main.c would fill them (but a source that fails at start is
 * refused, not retried). */
static __attribute__((unused)) struct pd_opts fake_opts(void)
{
	static char sysfs[300], msr[300], cpuinfo[300], proc[300];
	snprintf(sysfs, sizeof(sysfs), "%s/sys", fake_root);
	snprintf(msr, sizeof(msr), "%s/dev/cpu", fake_root);
	snprintf(cpuinfo, sizeof(cpuinfo), "%s/cpuinfo", fake_root);
	snprintf(proc, sizeof(proc), "%s/proc", fake_root);
	pd_conf_destroy(&fake_conf);
	if (!(fake_conf = pd_conf_new()))
		exit(99);
	fake_set("sysfs_root", sysfs);
	fake_set("msr_root", msr);
	fake_set("proc_root", proc);
	struct pd_opts o;
	pd_opts_from_conf(&o, fake_conf, 5000, 0);
	o.cpuinfo_path = cpuinfo;
	o.interval_ns = 100000000ull;
	o.retry = false;
	return o;
}

/* The zone named name in a sample, or NULL. */
static __attribute__((unused)) const struct wb_power_zone *sample_zone(const struct wb_power *p,
								       const char *name)
{
	for (size_t i = 0; i < p->n_zones; i++)
		if (!strcmp(p->zones[i].name, name))
			return &p->zones[i];
	return NULL;
}

#endif
