/*
 * [powerd]'s keys: powerd's own (pub, interval, source, ...), then the keys each source brings in
 * its row of pd_sources, composed once into one section. powerd's flags and config file, its
 * --help, docs/wattbus.conf and the CLI's runs of the sources (doctor, probe) read this one table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plaus.h"
#include "powerd.h"

#define OFF(f) offsetof(struct pd_conf, f)
/* WB_CONF_RESTART: the keys that define the zones or their meters (main.c's on_reload). The help
 * of `source` is made from the table of sources (source_help). */
static const struct wb_conf_key own_keys[] = {
    {"pub", WB_CONF_STR, OFF(pub), "ipc://%r/powerd.sock", 0, 0, NULL,
     "endpoint the power and stat messages are published on"},
    {"interval", WB_CONF_DURATION, OFF(interval_ns), "1s", 10e6, 3600e9, NULL,
     "sampling interval (10ms..1h); samples fall on wall-clock multiples of it"},
    {"source", WB_CONF_LIST | WB_CONF_RESTART, OFF(source), "auto", 0, 0, NULL, NULL},
    {"sysfs_root", WB_CONF_STR | WB_CONF_RESTART, OFF(sysfs_root), "/sys", 0, 0, NULL,
     "where sysfs is mounted (class/powercap, class/hwmon, devices/system/cpu)"},
    {"max_power_w", WB_CONF_DOUBLE, OFF(max_power_w), "0", 0, 1e6, NULL,
     "highest plausible power of one zone; faster counter changes and higher readings are rejected (0: [global] max_zone_w, the bound every later stage applies; 5000 W when that is 0)"},
};
#undef OFF

#define PD_CONF_KEYS_MAX 96

static struct {
	bool done;
	struct wb_conf_key keys[PD_CONF_KEYS_MAX];
	struct wb_conf_section sec;
	size_t size;
	size_t offs[1 + PD_SOURCES_MAX]; /* powerd's own block, then each source's */
	char source_help[512];
} composed;

/* "meters to read: auto (the first usable of rapl, msr, hwmon) or a list of rapl, ..." */
static void source_help(char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "meters to read: auto (the first usable of");
	unsigned n = 0;
	for (unsigned s = 0; s < pd_nsources && len < size; s++)
		if (pd_sources[s]->in_auto)
			len += (size_t)snprintf(buf + len, size - len, "%s %s", n++ ? "," : "",
						pd_sources[s]->name);
	if (len < size)
		len += (size_t)snprintf(buf + len, size - len, ") or a list of");
	for (unsigned s = 0; s < pd_nsources && len < size; s++) {
		const struct pd_source *src = pd_sources[s];
		len += (size_t)snprintf(buf + len, size - len, "%s %s%s%s%s", s ? "," : "",
					src->name, src->note ? " (" : "",
					src->note ? src->note : "", src->note ? ")" : "");
	}
}

static const struct wb_conf_section *compose(void)
{
	if (composed.done)
		return &composed.sec;
	struct wb_conf_part parts[1 + PD_SOURCES_MAX];
	parts[0] = (struct wb_conf_part){own_keys, sizeof(own_keys) / sizeof(own_keys[0]),
					 sizeof(struct pd_conf)};
	for (unsigned s = 0; s < pd_nsources; s++)
		parts[1 + s] = (struct wb_conf_part){pd_sources[s]->keys, pd_sources[s]->nkeys,
						     pd_sources[s]->conf_size};
	char err[256];
	int n = wb_conf_compose(parts, 1 + pd_nsources, composed.keys, PD_CONF_KEYS_MAX,
				composed.offs, &composed.size, err, sizeof(err));
	if (n < 0) {
		/* the tables in the code disagree: a programming error, caught by any test */
		log_errx("powerd's key tables do not compose: %s", err);
		abort();
	}
	source_help(composed.source_help, sizeof(composed.source_help));
	for (int i = 0; i < n; i++)
		if (!strcmp(composed.keys[i].name, "source"))
			composed.keys[i].help = composed.source_help;
	composed.sec = (struct wb_conf_section){"powerd", composed.keys, (size_t)n, NULL};
	composed.done = true;
	return &composed.sec;
}

const struct wb_conf_section *pd_conf_section(size_t *conf_size)
{
	const struct wb_conf_section *sec = compose();
	if (conf_size)
		*conf_size = composed.size;
	return sec;
}

static size_t source_off(const struct pd_source *src)
{
	compose();
	int s = pd_source_index(src);
	return s < 0 ? 0 : composed.offs[1 + s];
}

void pd_opts_from_conf(struct pd_opts *o, const void *conf, double max_zone_w, int reconnect_max_ms)
{
	const struct pd_conf *c = conf;
	*o = (struct pd_opts){
	    .conf = conf,
	    .sysfs_root = c->sysfs_root,
	    .cpuinfo_path = "/proc/cpuinfo",
	    /* One bound for every stage: a zone powerd publishes is one alignd accepts. */
	    .max_power_w = c->max_power_w > 0 ? c->max_power_w
			   : max_zone_w > 0   ? max_zone_w
					      : WB_ZONE_MAX_W,
	    .interval_ns = c->interval_ns,
	    .retry = true,
	    .reconnect_max_ms = reconnect_max_ms,
	};
}

const void *pd_source_conf(const struct pd_opts *opts, const struct pd_source *src)
{
	return (const char *)opts->conf + source_off(src);
}

void *pd_conf_new(void)
{
	size_t size;
	struct wb_conf_section sec = *pd_conf_section(&size);
	if (!(sec.dst = calloc(1, size)))
		return NULL;
	char err[WB_CONF_ERR_MAX];
	if (wb_conf_defaults(&sec, 1, err, sizeof(err)) < 0) {
		log_errx("powerd's defaults: %s", err);
		pd_conf_destroy(&sec.dst);
	}
	return sec.dst;
}

int pd_conf_set(void *conf, const char *key, const char *value, char *err, size_t errlen)
{
	struct wb_conf_section sec = *pd_conf_section(NULL);
	sec.dst = conf;
	char origin[80];
	snprintf(origin, sizeof(origin), "--%s", key);
	return wb_conf_set(&sec, key, value, origin, err, errlen);
}

void pd_conf_destroy(void **conf_p)
{
	if (!*conf_p)
		return;
	struct wb_conf_section sec = *pd_conf_section(NULL);
	sec.dst = *conf_p;
	wb_conf_free(&sec, 1);
	free(*conf_p);
	*conf_p = NULL;
}

size_t pd_conf_source_set(const void *conf, const struct pd_source *src, char *buf, size_t len)
{
	buf[0] = '\0';
	if (!src->nkeys)
		return 0;
	void *defaults = pd_conf_new();
	if (!defaults)
		return 0;
	size_t off = source_off(src);
	/* every key of its own, as restart keys, so that the comparison takes them all */
	struct wb_conf_key keys[PD_CONF_KEYS_MAX];
	size_t n = src->nkeys < PD_CONF_KEYS_MAX ? src->nkeys : PD_CONF_KEYS_MAX;
	for (size_t i = 0; i < n; i++) {
		keys[i] = src->keys[i];
		keys[i].type |= WB_CONF_RESTART;
	}
	struct wb_conf_section sec = {"powerd", keys, n, NULL};
	size_t changed = wb_conf_restart_changes(&sec, (const char *)conf + off,
						 (const char *)defaults + off, buf, len);
	pd_conf_destroy(&defaults);
	return changed;
}
