/*
 * The meter sources powerd knows, in the order `source = auto` tries them. A
 * new source is its own file defining a struct pd_source, plus one row here.
 */
#include <stdio.h>
#include <string.h>

#include "powerd.h"

const struct pd_source *const pd_sources[] = {
    &rapl_source, &msr_source, &hwmon_source, &exec_source, &redfish_source,
    &ipmi_source, &bus_source, &nvml_source,  &fake_source,
};
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
