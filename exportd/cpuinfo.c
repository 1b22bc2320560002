/*
 * kepler_node_cpu_info: one entry per logical CPU from /proc/cpuinfo, read once
 * at start (and on reload), as Kepler's cpuinfo collector does through procfs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exportd.h"
#include "grow.h"
#include "log.h"

/* Copy the value of a "key\t: value" line if its key is name. */
static bool field(const char *line, size_t len, const char *name, char *dst, size_t dstlen)
{
	size_t n = strlen(name);
	if (len < n || strncmp(line, name, n) != 0)
		return false;
	const char *p = line + n;
	const char *end = line + len;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= end || *p != ':')
		return false;
	p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	size_t vlen = (size_t)(end - p);
	while (vlen && (p[vlen - 1] == ' ' || p[vlen - 1] == '\t' || p[vlen - 1] == '\r'))
		vlen--;
	snprintf(dst, dstlen, "%.*s", (int)(vlen < dstlen ? vlen : dstlen - 1), p);
	return true;
}

int cpuinfo_parse(const char *text, struct cpuinfo_entry **out)
{
	struct cpuinfo_entry *v = NULL, *cur = NULL;
	size_t n = 0, cap = 0;
	*out = NULL;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char tmp[16];
		if (field(line, len, "processor", tmp, sizeof tmp)) {
			/* every "processor" line opens a CPU; the other keys attach to the last one
			 */
			if (wb_grow(&v, &cap, n + 1, sizeof *v, 16) < 0) {
				free(v);
				return -1;
			}
			cur = &v[n++];
			*cur = (struct cpuinfo_entry){0};
			snprintf(cur->processor, sizeof cur->processor, "%s", tmp);
		} else if (cur) {
			(void)(field(line, len, "vendor_id", cur->vendor_id,
				     sizeof cur->vendor_id) ||
			       field(line, len, "model name", cur->model_name,
				     sizeof cur->model_name) ||
			       field(line, len, "physical id", cur->physical_id,
				     sizeof cur->physical_id) ||
			       field(line, len, "core id", cur->core_id, sizeof cur->core_id));
		}
		line += len + (nl != NULL);
	}
	*out = v;
	return (int)n;
}

int cpuinfo_read(const char *path, struct cpuinfo_entry **out)
{
	*out = NULL;
	FILE *f = fopen(path, "re");
	if (!f) {
		log_warn("cpuinfo: %s: kepler_node_cpu_info not exported", path);
		return 0;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem) {
		fclose(f);
		return -1;
	}
	char buf[4096];
	size_t r;
	while ((r = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, r, mem);
	bool err = ferror(f);
	fclose(f);
	fclose(mem);
	if (err) {
		log_warn("cpuinfo: reading %s", path);
		free(text);
		return 0;
	}
	int n = cpuinfo_parse(text ? text : "", out);
	free(text);
	return n;
}
