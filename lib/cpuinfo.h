/*
 * /proc/cpuinfo, parsed once for every stage: one entry per logical CPU with the
 * keys wattbus reads, and the machine's facts summed over them (for estimd's machine
 * spec, exportd's CPU info and powerd's MSR source, which reads its x86 family). Pure except
 * wb_cpuinfo_read. Spec structs (Kepler's machine_spec) are built from the facts
 * elsewhere; this module only says what the kernel wrote.
 */
#ifndef WB_CPUINFO_H
#define WB_CPUINFO_H

#include <stddef.h>
#include <stdint.h>

/* One logical CPU: the values as written, trailing blanks removed; "" when absent. */
struct wb_cpuinfo_cpu {
	char processor[16], vendor_id[64], model_name[128], physical_id[16], core_id[16];
	double mhz;			/* "cpu MHz"; 0 when absent (arm64) */
	char cpu_family[16], model[16]; /* x86's numbers, as written (powerd's MSR quirks) */
};

/*
 * Parse cpuinfo text: every "processor" line opens a CPU and the keys after it
 * belong to it; lines before the first are ignored, a last line without a
 * newline is read (a truncated file gives the CPUs it has). *out is malloc'd
 * (caller frees; NULL for none). The number of CPUs, or -1 when out of memory.
 */
int wb_cpuinfo_parse(const char *text, struct wb_cpuinfo_cpu **out);
/* Read path and parse it. The number of CPUs, or -1 with err ("PATH: reason") and errno. */
int wb_cpuinfo_read(const char *path, struct wb_cpuinfo_cpu **out, char *err, size_t errlen);

/* The machine, from its CPUs. */
struct wb_cpuinfo_facts {
	uint64_t cpus;	      /* logical CPUs */
	uint64_t sockets;     /* distinct physical ids ("" counts as one: arm64) */
	uint64_t cores;	      /* distinct (physical id, core id) pairs */
	char vendor_id[64];   /* the first CPU's */
	char model_name[128]; /* the first non-empty one; "" on arm64 */
	double max_mhz;	      /* the highest cpu MHz; 0 when none */
};
void wb_cpuinfo_facts(const struct wb_cpuinfo_cpu *cpus, size_t n, struct wb_cpuinfo_facts *out);

#endif
