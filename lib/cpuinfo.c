/*
 * /proc/cpuinfo's "key<TAB>: value" lines: one parser for estimd's machine spec,
 * exportd's kepler_node_cpu_info and its Kepler 0.9 node info, powerd's MSR source.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"
#include "grow.h"

/* The value of a "key : value" line of len bytes if its key is name, else NULL. */
static const char *value_of(const char *line, size_t len, const char *name, size_t *vlen)
{
	size_t n = strlen(name);
	if (len < n || strncmp(line, name, n) != 0)
		return NULL;
	const char *p = line + n, *end = line + len;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= end || *p != ':')
		return NULL;
	p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	size_t l = (size_t)(end - p);
	while (l && (p[l - 1] == ' ' || p[l - 1] == '\t' || p[l - 1] == '\r'))
		l--;
	*vlen = l;
	return p;
}

/* Copy the value into dst (cut to its size) if the line's key is name. */
static bool field(const char *line, size_t len, const char *name, char *dst, size_t dstlen)
{
	size_t vlen;
	const char *v = value_of(line, len, name, &vlen);
	if (!v)
		return false;
	snprintf(dst, dstlen, "%.*s", (int)(vlen < dstlen ? vlen : dstlen - 1), v);
	return true;
}

int wb_cpuinfo_parse(const char *text, struct wb_cpuinfo_cpu **out)
{
	struct wb_cpuinfo_cpu *v = NULL, *cur = NULL;
	size_t n = 0, cap = 0;
	*out = NULL;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char proc[sizeof v->processor], mhz[32];
		if (field(line, len, "processor", proc, sizeof proc)) {
			if (wb_grow(&v, &cap, n + 1, sizeof *v, 16) < 0) {
				free(v);
				return -1;
			}
			cur = &v[n++];
			*cur = (struct wb_cpuinfo_cpu){0};
			memcpy(cur->processor, proc, sizeof proc);
		} else if (cur && field(line, len, "cpu MHz", mhz, sizeof mhz)) {
			cur->mhz = strtod(mhz, NULL);
		} else if (cur) {
			(void)(field(line, len, "vendor_id", cur->vendor_id,
				     sizeof cur->vendor_id) ||
			       field(line, len, "model name", cur->model_name,
				     sizeof cur->model_name) ||
			       field(line, len, "physical id", cur->physical_id,
				     sizeof cur->physical_id) ||
			       field(line, len, "core id", cur->core_id, sizeof cur->core_id) ||
			       field(line, len, "cpu family", cur->cpu_family,
				     sizeof cur->cpu_family) ||
			       field(line, len, "model", cur->model, sizeof cur->model));
		}
		line += len + (nl != NULL);
	}
	*out = v;
	return (int)n;
}

int wb_cpuinfo_read(const char *path, struct wb_cpuinfo_cpu **out, char *err, size_t errlen)
{
	*out = NULL;
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	/* procfs files have no size: read to the end through a memory stream */
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		errno = ENOMEM;
		return -1;
	}
	char buf[4096];
	size_t r;
	while ((r = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, r, mem);
	int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
	fclose(f);
	if (fclose(mem) != 0 && !rerr)
		rerr = ENOMEM;
	if (rerr) {
		snprintf(err, errlen, "%s: %s", path, strerror(rerr));
		free(text);
		errno = rerr;
		return -1;
	}
	int n = wb_cpuinfo_parse(text ? text : "", out);
	free(text);
	if (n < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		errno = ENOMEM;
	}
	return n;
}

void wb_cpuinfo_facts(const struct wb_cpuinfo_cpu *cpus, size_t n, struct wb_cpuinfo_facts *out)
{
	*out = (struct wb_cpuinfo_facts){.cpus = n};
	if (n)
		snprintf(out->vendor_id, sizeof out->vendor_id, "%s", cpus[0].vendor_id);
	for (size_t i = 0; i < n; i++) {
		const struct wb_cpuinfo_cpu *e = &cpus[i];
		if (!out->model_name[0])
			snprintf(out->model_name, sizeof out->model_name, "%s", e->model_name);
		if (e->mhz > out->max_mhz)
			out->max_mhz = e->mhz;
		/* Quadratic, as Kepler 0.9 counts them; a machine has at most a few thousand CPUs.
		 */
		bool new_socket = true, new_core = true;
		for (size_t j = 0; j < i; j++) {
			bool socket = !strcmp(cpus[j].physical_id, e->physical_id);
			new_socket &= !socket;
			new_core &= !(socket && !strcmp(cpus[j].core_id, e->core_id));
		}
		out->sockets += new_socket;
		out->cores += new_core;
	}
}
