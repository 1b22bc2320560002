/*
 * The meter sources powerd knows, in the order `source = auto` tries them. A
 * new source is its own file defining a struct pd_source (its ops, keys and
 * counters), plus one row here (docs/ARCHITECTURE.md, "Adding a powerd source").
 */
#include <stdio.h>
#include <string.h>

#include "powerd.h"

/* One row per source: X(name) stands for the struct pd_source name_source in powerd/name.c. */
#define PD_SOURCE_ROWS(X)                                                                          \
	X(rapl)                                                                                    \
	X(msr)                                                                                     \
	X(hwmon)                                                                                   \
	X(exec)                                                                                    \
	X(redfish)                                                                                 \
	X(ipmi)                                                                                    \
	X(bus)                                                                                     \
	X(nvml)                                                                                    \
	X(fake)

#define DECLARE(name) extern const struct pd_source name##_source;
PD_SOURCE_ROWS(DECLARE)
#undef DECLARE

#define ROW(name) &name##_source,
const struct pd_source *const pd_sources[] = {PD_SOURCE_ROWS(ROW)};
#undef ROW
const unsigned pd_nsources = sizeof(pd_sources) / sizeof(pd_sources[0]);
_Static_assert(sizeof(pd_sources) / sizeof(pd_sources[0]) <= PD_SOURCES_MAX,
	       "more sources than bits in a source mask");

int pd_source_index(const struct pd_source *src)
{
	for (unsigned i = 0; i < pd_nsources; i++)
		if (pd_sources[i] == src)
			return (int)i;
	return -1;
}

const struct pd_source *pd_source_find(const char *name)
{
	for (unsigned i = 0; i < pd_nsources; i++)
		if (!strcmp(pd_sources[i]->name, name))
			return pd_sources[i];
	return NULL;
}

void pd_source_names(char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "auto");
	for (unsigned i = 0; i < pd_nsources && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, ", %s", pd_sources[i]->name);
}
