/*
 * This machine's spec (processor, logical CPUs, sockets, memory, frequency), the
 * attributes by which Kepler's model server tells node types apart. Read from
 * procfs and sysfs under roots that tests point at fake trees.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"
#include "estimd.h"
#include "spec.h"

static FILE *open_under(const char *root, const char *rel)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return fopen(path, "r");
}

static uint64_t max_cpufreq_mhz(const char *sysfs_root)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/devices/system/cpu", sysfs_root);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint64_t best_khz = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "cpu", 3) != 0 || !isdigit((unsigned char)e->d_name[3]))
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s/cpufreq/cpuinfo_max_freq", dir, e->d_name);
		FILE *f = fopen(path, "r");
		unsigned long long khz;
		if (f && fscanf(f, "%llu", &khz) == 1 && khz > best_khz)
			best_khz = khz;
		if (f)
			fclose(f);
	}
	closedir(d);
	return (best_khz + 500) / 1000;
}

int mspec_read(const char *procfs_root, const char *sysfs_root, struct km_spec *out, char *err,
	       size_t errlen)
{
	memset(out, 0, sizeof(*out));
	char path[4096];
	snprintf(path, sizeof(path), "%s/cpuinfo", procfs_root);
	struct wb_cpuinfo_cpu *cpus;
	int n = wb_cpuinfo_read(path, &cpus, err, errlen);
	if (n < 0)
		return -1;
	struct wb_cpuinfo_facts cf;
	wb_cpuinfo_facts(cpus, (size_t)n, &cf);
	free(cpus);
	wb_processor_name(cf.model_name, out->processor, sizeof(out->processor));
	out->cores = cf.cpus;
	out->chips = cf.sockets;
	double mhz = cf.max_mhz;
	char line[1024];
	FILE *f;
	if ((f = open_under(procfs_root, "meminfo"))) {
		unsigned long long kib;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
				out->memory_gib = (uint64_t)(kib / (1024ull * 1024ull));
				break;
			}
		fclose(f);
	}
	double fmax = (double)max_cpufreq_mhz(sysfs_root);
	if (mhz > fmax)
		fmax = mhz;
	/* Kepler rounds to a tenth of a GHz: max(cpufreq max, current) / 100, rounded, * 100 */
	out->frequency_mhz = (uint64_t)llround(fmax / 100) * 100;
	return 0;
}

int mspec_read_env(struct km_spec *out, char *err, size_t errlen)
{
	const char *proc = getenv("WATTBUS_PROCFS_ROOT");
	const char *sys = getenv("WATTBUS_SYSFS_ROOT");
	return mspec_read(proc && proc[0] ? proc : "/proc", sys && sys[0] ? sys : "/sys", out, err,
			  errlen);
}

void mspec_to_msg(const struct km_spec *s, uint64_t cores, struct wb_model_spec *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->processor, sizeof(out->processor), "%s", s->processor);
	out->cores = cores ? cores : s->cores;
	out->chips = s->chips;
	out->memory_gib = s->memory_gib;
	out->frequency_mhz = s->frequency_mhz;
}
