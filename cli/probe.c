/*
 * wattbus probe: what a meter is. Every zone powerd would read here (its own
 * source discovery, as doctor runs it), an exec meter, or the power streams on
 * the bus is read fast for a while; the readings give the real update period,
 * the smallest step, the noise, the wrap range and time to wrap, the cost of a
 * read, the component covered, and the interval and max_lag alignd should use.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <jansson.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "codec.h"
#include "grow.h"
#include "log.h"
#include "../powerd/powerd.h"

#define PROBE_SETS_MAX PD_SOURCES_MAX
#define PROBE_ZONES_MAX 512

/* What each zone kind measures (schemas/power.json's kinds). */
static const struct {
	const char *kind, *covers;
} coverage[] = {
    {"package", "CPU socket: cores, caches, uncore"},
    {"core", "CPU cores only (PP0)"},
    {"uncore", "uncore or integrated GPU (PP1)"},
    {"dram", "memory (DRAM)"},
    {"psys", "platform as the CPU sees it (psys): package, chipset, more on client parts"},
    {"platform", "whole machine (BMC, ACPI or wall meter)"},
    {"gpu", "GPU board"},
};

static const char *covers(const char *kind)
{
	for (size_t i = 0; i < sizeof(coverage) / sizeof(coverage[0]); i++)
		if (!strcmp(kind, coverage[i].kind))
			return coverage[i].covers;
	return "not known (kind other): say what it measures with kind= in the meter's lines";
}

struct pzone {
	char host[64], name[64], kind[16], source[16], path[256];
	bool is_power;	    /* readings in uW rather than a counter */
	double uj_per_tick; /* a counter tick in uJ */
	double range_uj;    /* the counter's range (max_energy_range_uj), 0: does not wrap */
	double wrap_uj;	    /* what analysis adds at a wrap (range + one tick), 0: none */
	struct pd_set
	    *set; /* powerd and exec modes: the zone is zone zi of set (powerd.h's seam) */
	size_t zi;
	bool polled;   /* read when asked (pd_zone_poll); else its readings come as they arrive */
	uint64_t seen; /* readings of it taken so far */
	struct series s;
	double *lat_s; /* per read: how long it took (bus: how late it arrived) */
	size_t nlat, latcap;
	double cpu_s; /* CPU time spent reading (powerd mode) */
	uint64_t reads, read_errors, lost;
	bool full; /* readings stopped at PROBE_READINGS_MAX (or memory ran out) */
	char last_err[256];
	struct meter_stats st;
	struct meter_advice adv;
};

struct probe {
	const char *mode; /* "powerd", "exec", "bus" */
	uint64_t duration_ns, spacing_ns;
	struct cli_pd_roots r; /* r.o: the options powerd would run with */
	bool exec_stream;      /* exec mode: the command streams (exec_mode = stream) */
	struct pd_set *sets[PROBE_SETS_MAX];
	const char *set_why[PROBE_SETS_MAX];
	char why[PROBE_SETS_MAX][PD_WHY_MAX];
	unsigned nsets;
	struct pzone *z;
	size_t nz;
	double child_cpu_s; /* exec sample mode: CPU of the command's runs */
	uint64_t rejected;  /* bus mode: invalid frames left out */
};

/* Readings kept per zone (16 bytes each): at 100 us spacing, some seven minutes. */
#define PROBE_READINGS_MAX (4u << 20)

/* Keep one reading; past PROBE_READINGS_MAX the zone stops taking any (said in the report). */
static void zone_reading(struct pzone *z, uint64_t t_ns, double v)
{
	if (z->s.n >= PROBE_READINGS_MAX || series_add(&z->s, t_ns, v) < 0)
		z->full = true;
}

static struct pzone *zone_add(struct probe *p)
{
	if (p->nz >= PROBE_ZONES_MAX)
		return NULL;
	struct pzone *nz = realloc(p->z, (p->nz + 1) * sizeof(*nz));
	if (!nz)
		return NULL;
	p->z = nz;
	memset(&p->z[p->nz], 0, sizeof(p->z[0]));
	return &p->z[p->nz++];
}

static void add_lat(struct pzone *z, double s)
{
	if (wb_grow(&z->lat_s, &z->latcap, z->nlat + 1, sizeof(*z->lat_s), 1024) < 0)
		return;
	z->lat_s[z->nlat++] = s;
}

static double cpu_s(int who)
{
	struct rusage ru;
	if (getrusage(who, &ru) < 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / WB_NS_PER_SEC), (long)(ns % WB_NS_PER_SEC)};
	nanosleep(&ts, NULL);
}

/* Take the zones of one powerd set into the probe's list (those it does not have yet). */
static void take_zones(struct probe *p, struct pd_set *set)
{
	for (size_t i = 0; i < pd_set_nzones(set); i++) {
		bool have = false;
		for (size_t k = 0; k < p->nz && !have; k++)
			have = p->z[k].set == set && p->z[k].zi == i;
		if (have)
			continue;
		struct pzone *z = zone_add(p);
		if (!z)
			return;
		struct pd_zone_desc d;
		pd_zone_describe(set, i, &d);
		snprintf(z->name, sizeof(z->name), "%s", d.name);
		snprintf(z->kind, sizeof(z->kind), "%s", d.kind);
		snprintf(z->source, sizeof(z->source), "%s", d.source);
		snprintf(z->path, sizeof(z->path), "%s", d.path);
		z->is_power = d.is_power;
		z->polled = d.polled;
		z->uj_per_tick = d.uj_per_tick;
		z->range_uj = (double)d.range_uj;
		z->wrap_uj = d.wrap_uj;
		z->set = set;
		z->zi = i;
	}
}

/* Open powerd's sources on the roots, as `source = auto` would try them (or the one named). */
static void open_powerd(struct probe *p, const char *only)
{
	struct cli_pd_try tries[PROBE_SETS_MAX];
	p->nsets = cli_pd_discover(&p->r.o, only, tries, PROBE_SETS_MAX);
	for (unsigned k = 0; k < p->nsets; k++) {
		p->set_why[k] = tries[k].name;
		snprintf(p->why[k], sizeof(p->why[k]), "%s", tries[k].why);
		p->sets[k] = tries[k].set;
		if (p->sets[k])
			take_zones(p, p->sets[k]);
	}
}

/* Zones read when asked: read every one in turn, as fast as spacing allows. */
static void sample_reads(struct probe *p)
{
	uint64_t end = wb_mono_ns() + p->duration_ns;
	while (wb_mono_ns() < end && !cli_interrupted()) {
		for (size_t i = 0; i < p->nz; i++) {
			struct pzone *z = &p->z[i];
			if (!z->polled)
				continue;
			double v;
			double c0 = thread_cpu_s();
			uint64_t t0 = wb_mono_ns();
			enum pd_read_err rc =
			    pd_zone_poll(z->set, z->zi, &v, z->last_err, sizeof(z->last_err));
			uint64_t t1 = wb_mono_ns();
			z->cpu_s += thread_cpu_s() - c0;
			z->reads++;
			if (rc != PD_READ_OK) {
				z->read_errors++;
				continue;
			}
			zone_reading(z, t1, v);
			add_lat(z, (double)(t1 - t0) / 1e9);
		}
		if (p->spacing_ns)
			sleep_ns(p->spacing_ns);
	}
}

/* The zones whose readings come as they arrive (exec) that had one since the last look. */
static void take_readings(struct probe *p, double run_s)
{
	for (size_t i = 0; i < p->nz; i++) {
		struct pzone *z = &p->z[i];
		struct pd_zone_desc d;
		pd_zone_describe(z->set, z->zi, &d);
		if (z->polled || d.readings == z->seen)
			continue;
		z->seen = d.readings;
		z->reads++;
		zone_reading(z, d.last_mono_ns, d.last);
		if (run_s >= 0)
			add_lat(z, run_s);
	}
}

static void sample_exec(struct probe *p, struct pd_set *set)
{
	uint64_t end = wb_mono_ns() + p->duration_ns;
	double child0 = cpu_s(RUSAGE_CHILDREN);
	/* the start-up run's readings are the baselines powerd takes: not the probe's */
	take_zones(p, set);
	for (size_t i = 0; i < p->nz; i++) {
		struct pd_zone_desc d;
		pd_zone_describe(set, p->z[i].zi, &d);
		p->z[i].seen = d.readings;
	}
	while (wb_mono_ns() < end && !cli_interrupted()) {
		if (p->exec_stream) {
			/* the stream's lines as they come; a command that ended is restarted */
			uint64_t left = end - wb_mono_ns();
			pd_set_wait(set, left < 100 * WB_NS_PER_MS ? left : 100 * WB_NS_PER_MS);
			take_zones(p, set);
			take_readings(p, -1);
		} else {
			/* one run, as a sample of powerd starts it, waited for */
			uint64_t t0 = wb_mono_ns();
			pd_set_sample_begin(set, wb_now_ns(), t0);
			while (pd_set_wait(set, 100 * WB_NS_PER_MS) && !cli_interrupted())
				;
			uint64_t t1 = wb_mono_ns();
			take_zones(p, set);
			take_readings(p, (double)(t1 - t0) / 1e9);
			if (p->spacing_ns)
				sleep_ns(p->spacing_ns);
		}
	}
	p->child_cpu_s = cpu_s(RUSAGE_CHILDREN) - child0;
	/* Failed runs and lines powerd would refuse: every zone of the command shares them. */
	uint64_t failed = pd_set_counter(set, "exec_failures"),
		 unreadable = pd_set_counter(set, "parse_errors"),
		 refused = pd_set_counter(set, "implausible") + pd_set_counter(set, "backwards");
	for (size_t i = 0; i < p->nz; i++) {
		p->z[i].read_errors = failed + unreadable + refused;
		if (p->z[i].read_errors)
			snprintf(
			    p->z[i].last_err, sizeof(p->z[i].last_err),
			    "%llu failed runs, %llu lines unreadable, %llu readings implausible: see the warnings",
			    (unsigned long long)failed, (unsigned long long)unreadable,
			    (unsigned long long)refused);
	}
	if (!p->exec_stream)
		for (size_t i = 0; i < p->nz; i++)
			p->z[i].cpu_s = p->child_cpu_s; /* one run reads every zone */
}

/* Bus mode: each power stream's samples as published, and how late they arrive. */
static int sample_bus(struct probe *p, const char *endpoint, const char *host,
		      const struct wb_sockopts *so)
{
	char prefix[WB_TOPIC_MAX];
	snprintf(prefix, sizeof(prefix), "power/%s", host ? host : "");
	const char *prefixes[] = {prefix};
	struct wb_sub *sub = cli_sub_open(endpoint, prefixes, 1, so);
	if (!sub)
		return -1;
	uint64_t end = wb_mono_ns() + p->duration_ns;
	while (wb_mono_ns() < end && !cli_interrupted()) {
		uint64_t left = end - wb_mono_ns();
		if (!wb_sub_wait(sub,
				 (int)(left / WB_NS_PER_MS < 100 ? left / WB_NS_PER_MS + 1 : 100)))
			continue;
		struct wb_msg msg = {0};
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_recv(sub, &msg, &rx, &err, NULL);
		if (rc < 0)
			break;
		if (rc == 0) {
			p->rejected++; /* bus.c logged why, rate-limited */
			continue;
		}
		if (msg.kind != WB_POWER) {
			wb_msg_clear(&msg);
			continue;
		}
		const struct wb_power *pw = &msg.power;
		if (host && strcmp(pw->env.host, host) != 0) {
			wb_msg_clear(&msg);
			continue; /* "power/node1" also matches node10 */
		}
		for (size_t i = 0; i < pw->n_zones; i++) {
			const struct wb_power_zone *wz = &pw->zones[i];
			struct pzone *z = NULL;
			for (size_t k = 0; k < p->nz && !z; k++)
				if (!strcmp(p->z[k].host, pw->env.host) &&
				    !strcmp(p->z[k].name, wz->name))
					z = &p->z[k];
			if (!z) {
				if (!(z = zone_add(p)))
					continue;
				snprintf(z->host, sizeof(z->host), "%s", pw->env.host);
				snprintf(z->name, sizeof(z->name), "%s", wz->name);
				snprintf(z->kind, sizeof(z->kind), "%s", wz->zone);
				snprintf(z->source, sizeof(z->source), "%s", wz->source);
				snprintf(z->path, sizeof(z->path), "%s", wz->path);
				z->uj_per_tick = 1;
			} else {
				z->lost += rx.lost;
			}
			z->range_uj = (double)wz->max_energy_range_uj; /* published values are
									  already wrap-corrected */
			z->reads++;
			zone_reading(z, pw->t, (double)wz->energy_uj);
			add_lat(z, rx.recv_ns > pw->t ? (double)(rx.recv_ns - pw->t) / 1e9 : 0);
		}
		wb_msg_clear(&msg);
	}
	wb_sub_destroy(&sub);
	return 0;
}

/* ---- output ---- */

static void fmt_s(char *buf, size_t size, double s)
{
	if (!isfinite(s))
		snprintf(buf, size, "-");
	else if (s < 1e-3)
		snprintf(buf, size, "%.0f us", s * 1e6);
	else if (s < 1)
		snprintf(buf, size, "%.3g ms", s * 1e3);
	else if (s < 3600)
		snprintf(buf, size, "%.3g s", s);
	else if (s < 86400 * 2)
		snprintf(buf, size, "%.3g h", s / 3600);
	else
		snprintf(buf, size, "%.3g d", s / 86400);
}

static void fmt_step(char *buf, size_t size, const struct pzone *z)
{
	if (!isfinite(z->st.step_min))
		snprintf(buf, size, "-");
	else if (z->is_power)
		snprintf(buf, size, "%.4g W", z->st.step_min / 1e6);
	else if (z->st.step_min >= 1e6)
		snprintf(buf, size, "%.4g J", z->st.step_min / 1e6);
	else if (z->st.step_min >= 1e3)
		snprintf(buf, size, "%.4g mJ", z->st.step_min / 1e3);
	else
		snprintf(buf, size, "%.4g uJ", z->st.step_min);
}

static double wrap_s(const struct pzone *z)
{
	return z->range_uj > 0 && z->st.mean_w > 0 ? z->range_uj / 1e6 / z->st.mean_w : NAN;
}

static double lat_q(const struct pzone *z, double q)
{
	return z->nlat ? series_quantile(z->lat_s, z->nlat, q) : NAN;
}

/* CPU time one read costs; NAN where the probe cannot tell (the bus, an exec stream). */
static double cpu_per_read(const struct probe *p, const struct pzone *z)
{
	if (!strcmp(p->mode, "bus") || p->exec_stream || !z->reads)
		return NAN;
	return z->cpu_s / (double)z->reads;
}

static json_t *jnum(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static void print_text(const struct probe *p, const struct meter_advice *all)
{
	const char *lat_word = strcmp(p->mode, "bus") ? "READ" : "ARRIVAL";
	printf("%-22s %-8s %-7s %-10s %-11s %8s %8s %-11s %-9s %-9s %-9s\n", "ZONE", "KIND",
	       "SOURCE", "PERIOD", "STEP", "MEAN W", "NOISE W", "WRAP", "TO WRAP", lat_word,
	       "CPU/READ");
	for (size_t i = 0; i < p->nz; i++) {
		const struct pzone *z = &p->z[i];
		char name[200], per[32], step[32], wrap[32], tow[32], lat[32], cpu[32];
		snprintf(name, sizeof(name), "%s%s%s", z->host, z->host[0] ? "/" : "", z->name);
		fmt_s(per, sizeof(per) - 2,
		      z->st.period_bounded ? z->st.spacing_s : z->st.period_s);
		if (z->st.period_bounded) {
			memmove(per + 2, per, strlen(per) + 1);
			memcpy(per, "<=", 2);
		}
		fmt_step(step, sizeof(step), z);
		if (z->range_uj >= 1e9)
			snprintf(wrap, sizeof(wrap), "%.4g kJ", z->range_uj / 1e9);
		else if (z->range_uj > 0)
			snprintf(wrap, sizeof(wrap), "%.4g J", z->range_uj / 1e6);
		else
			snprintf(wrap, sizeof(wrap), "none");
		fmt_s(tow, sizeof(tow), wrap_s(z));
		fmt_s(lat, sizeof(lat), lat_q(z, 0.5));
		fmt_s(cpu, sizeof(cpu), cpu_per_read(p, z));
		char mean[32] = "-", noise[32] = "-";
		if (isfinite(z->st.mean_w))
			snprintf(mean, sizeof(mean), "%.3f", z->st.mean_w);
		if (isfinite(z->st.noise_w))
			snprintf(noise, sizeof(noise), "%.3f", z->st.noise_w);
		/* zone names come from sysfs, a command or the bus: data, escaped */
		printf("%-22s %-8s %-7s %-10s %-11s %8s %8s %-11s %-9s %-9s %-9s\n", WB_VIS(name),
		       WB_VIS(z->kind), WB_VIS(z->source),
		       z->st.changes >= 2 || z->st.period_bounded ? per
		       : z->st.changes				  ? "1 change"
								  : "no change",
		       step, mean, noise, wrap, tow, lat, cpu);
	}
	printf("\n");
	for (size_t i = 0; i < p->nz; i++) {
		const struct pzone *z = &p->z[i];
		char sp[32], p10[32], p90[32], lmax[32];
		fmt_s(sp, sizeof(sp), z->st.spacing_s);
		fmt_s(p10, sizeof(p10), z->st.period_p10_s);
		fmt_s(p90, sizeof(p90), z->st.period_p90_s);
		fmt_s(lmax, sizeof(lmax), lat_q(z, 1));
		printf(
		    "%s%s%s: %s; %zu readings %s apart, %zu changes (period 10-90%%: %s - %s); %s max %s",
		    WB_VIS(z->host), z->host[0] ? "/" : "", WB_VIS(z->name), covers(z->kind),
		    z->st.samples, sp, z->st.changes, p10, p90,
		    strcmp(p->mode, "bus") ? "read" : "arrival", lmax);
		if (z->read_errors)
			printf("; %llu read errors (%s)", (unsigned long long)z->read_errors,
			       WB_VIS(z->last_err));
		if (z->lost)
			printf("; %llu messages lost", (unsigned long long)z->lost);
		if (z->full)
			printf(
			    "; readings stopped at %zu: a longer --duration needs a wider --spacing",
			    z->s.n);
		if (z->st.period_bounded && (p->exec_stream || !strcmp(p->mode, "bus")))
			printf("; it changed at nearly every %s: it updates at least that often",
			       p->exec_stream ? "line" : "message");
		else if (z->st.period_bounded)
			printf(
			    "; it changed at nearly every reading: read it faster (--spacing) for its real period");
		char dur[32];
		fmt_s(dur, sizeof(dur), (double)p->duration_ns / 1e9);
		if (!z->adv.known && z->st.changes == 0)
			printf(
			    "\n    no change seen in %s: no interval or max_lag to suggest; probe longer (--duration) or under load\n",
			    dur);
		else if (!z->adv.known)
			printf(
			    "\n    one change seen in %s: its update period is unknown, no interval or max_lag to suggest; probe longer (--duration) or under load\n",
			    dur);
		else
			printf("\n    alignd: interval = %gs, max_lag = %gs\n", z->adv.interval_s,
			       z->adv.max_lag_s);
		double w = wrap_s(z);
		if (isfinite(w) && w < 2 * z->adv.interval_s)
			printf(
			    "    warning: the counter wraps in %.3g s at this power: sample at least twice as often\n",
			    w);
	}
	if (all->known)
		printf(
		    "\nsettings for all zones together: [powerd] interval = %gs, [alignd] max_lag = %gs\n",
		    all->interval_s, all->max_lag_s);
	else if (p->nz)
		printf(
		    "\nsettings for all zones together: none to suggest, no zone changed twice\n");
	if (p->rejected)
		printf("%llu power frames rejected as invalid (left out)\n",
		       (unsigned long long)p->rejected);
}

static int print_json(const struct probe *p, const struct meter_advice *all)
{
	json_t *zones = json_array();
	for (size_t i = 0; i < p->nz; i++) {
		const struct pzone *z = &p->z[i];
		json_t *o = json_pack(
		    "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:I, s:I}", "host", z->host,
		    "name", z->name, "kind", z->kind, "covers", covers(z->kind), "source",
		    z->source, "path", z->path, "unit", z->is_power ? "uW" : "uJ", "samples",
		    (json_int_t)z->st.samples, "changes", (json_int_t)z->st.changes,
		    "period_bounded", z->st.period_bounded, "read_errors",
		    (json_int_t)z->read_errors, "lost", (json_int_t)z->lost);
		json_object_set_new(o, "readings_capped", json_boolean(z->full));
		json_object_set_new(o, "spacing_s", jnum(z->st.spacing_s));
		json_object_set_new(o, "period_s", jnum(z->st.period_s));
		json_object_set_new(o, "period_p10_s", jnum(z->st.period_p10_s));
		json_object_set_new(o, "period_p90_s", jnum(z->st.period_p90_s));
		json_object_set_new(o, z->is_power ? "step_uw" : "step_uj", jnum(z->st.step_min));
		json_object_set_new(o, "mean_w", jnum(z->st.mean_w));
		json_object_set_new(o, "noise_w", jnum(z->st.noise_w));
		json_object_set_new(o, "range_uj", jnum(z->range_uj > 0 ? z->range_uj : NAN));
		json_object_set_new(o, "wrap_s", jnum(wrap_s(z)));
		json_object_set_new(o, strcmp(p->mode, "bus") ? "read_latency_s" : "arrival_lag_s",
				    json_pack("{s:o, s:o}", "median", jnum(lat_q(z, 0.5)), "max",
					      jnum(lat_q(z, 1))));
		json_object_set_new(o, "cpu_per_read_s", jnum(cpu_per_read(p, z)));
		json_object_set_new(o, "suggest",
				    z->adv.known
					? json_pack("{s:f, s:f}", "interval_s", z->adv.interval_s,
						    "max_lag_s", z->adv.max_lag_s)
					: json_null());
		json_array_append_new(zones, o);
	}
	json_t *root = json_pack("{s:s, s:f, s:o}", "mode", p->mode, "duration_s",
				 (double)p->duration_ns / 1e9, "zones", zones);
	if (p->nz)
		json_object_set_new(root, "suggest",
				    all->known
					? json_pack("{s:f, s:f}", "interval_s", all->interval_s,
						    "max_lag_s", all->max_lag_s)
					: json_null());
	json_t *why = json_object();
	for (unsigned i = 0; i < p->nsets; i++)
		if (!p->sets[i])
			json_object_set_new(why, p->set_why[i], json_string(p->why[i]));
	json_object_set_new(root, "sources_unusable", why);
	json_object_set_new(root, "rejected", json_integer((json_int_t)p->rejected));
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(root);
	if (!s)
		return 1;
	puts(s);
	free(s);
	return 0;
}

struct probe_opts {
	bool json, exec_stream;
	uint64_t duration_ns, spacing_ns;
	const char *only, *sys, *dev, *proc, *exec_cmd, *sub, *host;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct probe_opts, m)
static const struct cli_flag probe_flags[] = {
    CLI_DURATION("duration", 0, OFF(duration_ns), "3s", 0, 0, "D",
		 "how long to read (a BMC or ACPI meter needs a minute)"),
    CLI_DURATION("spacing", 0, OFF(spacing_ns), "100us", 0, 0, "D",
		 "pause between two rounds of reads (exec sample mode: between runs)"),
    CLI_STR(
	"source", 0, OFF(only), NULL, "NAME",
	"only this powerd source (any but exec: use --exec); default: those `source = auto` tries"),
    CLI_STR("sysfs-root", 0, OFF(sys), "/sys", "DIR", "where sysfs is"),
    CLI_STR("dev-root", 0, OFF(dev), "/dev", "DIR", "where /dev is"),
    CLI_STR("proc-root", 0, OFF(proc), "/proc", "DIR", "where procfs is"),
    CLI_STR(
	"exec", 0, OFF(exec_cmd), NULL, "CMD",
	"a meter command printing powerd exec lines (ZONE VALUE uj|w ...), run again and again"),
    CLI_SWITCH("exec-stream", 0, OFF(exec_stream),
	       "CMD runs on and prints lines as it reads the meter"),
    CLI_STR("sub", 0, OFF(sub), NULL, "ENDPOINT",
	    "the power messages on the bus (powerd, wattbus pub) instead"),
    CLI_STR("host", 0, OFF(host), NULL, "HOST", "only that host's power stream"),
    CLI_SWITCH("json", 0, OFF(json), "one JSON object instead of the table"),
    CLI_CURVE_SUB(OFF(so)),
};
static const struct cli_verb probe_verb = {
    CLI_VERB("probe", probe_flags, struct probe_opts, 0, 0),
    .synopsis = "[OPTIONS] [--source NAME] [--sysfs-root DIR] [--dev-root DIR] [--proc-root DIR]\n"
		"[OPTIONS] --exec CMD [--exec-stream]\n"
		"[OPTIONS] --sub ENDPOINT [--host HOST] [--curve-cert FILE --curve-peer FILE]"};

int cmd_probe(int argc, char **argv)
{
	struct probe_opts o;
	int first, rc = cli_parse(&probe_verb, argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	rc = 2;
	struct probe *p = calloc(1, sizeof(*p));
	if (!p) {
		fprintf(stderr, "wattbus probe: out of memory\n");
		return 1;
	}
	p->duration_ns = o.duration_ns;
	p->spacing_ns = o.spacing_ns;
	const char *only = o.only, *sub = o.sub, *host = o.host, *exec_cmd = o.exec_cmd;
	if (p->duration_ns < 100 * WB_NS_PER_MS) {
		fprintf(
		    stderr,
		    "wattbus probe: --duration: '%.3g s' is too short to see a meter change; give at least 100ms\n",
		    (double)p->duration_ns / 1e9);
		goto out;
	}
	if ((sub != NULL) + (exec_cmd != NULL) + (only != NULL) > 1) {
		fprintf(
		    stderr,
		    "wattbus probe: --sub, --exec and --source each pick what to probe: give one\n");
		goto out;
	}
	if (only && (!pd_source_find(only) || !strcmp(only, "exec"))) {
		char names[256];
		pd_source_names(names, sizeof(names));
		fprintf(stderr,
			"wattbus probe: --source: '%s' is not one of %s (exec: use --exec)\n", only,
			names);
		goto out;
	}
	if (cli_pd_opts(&p->r, o.sys, o.dev, o.proc) < 0 ||
	    (exec_cmd && (cli_pd_set(&p->r, "exec", exec_cmd, "--exec") < 0 ||
			  cli_pd_set(&p->r, "exec_mode", o.exec_stream ? "stream" : "sample",
				     "--exec-stream") < 0))) {
		rc = 1;
		goto out;
	}
	p->exec_stream = o.exec_stream;
	rc = 1;
	if (sub) {
		p->mode = "bus";
		if (sample_bus(p, sub, host, &o.so) < 0)
			goto out;
		if (!p->nz) {
			fprintf(stderr, "wattbus probe: no power message from %s%s%s in %.1f s%s\n",
				sub, host ? " for host " : "", host ? host : "",
				(double)p->duration_ns / 1e9,
				p->rejected ? " that was valid (see the rejections above)" : "");
			goto out;
		}
	} else if (exec_cmd) {
		p->mode = "exec";
		open_powerd(p, "exec");
		if (!p->sets[0]) {
			fprintf(stderr, "wattbus probe: --exec: %s\n", p->why[0]);
			goto out;
		}
		int level = log_get_level();
		log_set_level(WB_LOG_WARN); /* new zones are in the table; the meter's faults are
					       worth a line */
		sample_exec(p, p->sets[0]);
		log_set_level(level);
		if (!p->nz) {
			fprintf(stderr,
				"wattbus probe: --exec: '%s' printed no valid reading in %.1f s\n",
				exec_cmd, (double)p->duration_ns / 1e9);
			goto out;
		}
	} else {
		p->mode = "powerd";
		open_powerd(p, only);
		if (!p->nz) {
			fprintf(stderr, "wattbus probe: no meter here that powerd could read:");
			for (unsigned i = 0; i < p->nsets; i++)
				fprintf(stderr, "%s %s: %s", i ? ";" : "", p->set_why[i],
					p->why[i]);
			fprintf(stderr,
				" (`wattbus doctor` says more; an unknown meter: --exec CMD)\n");
			goto out;
		}
		sample_reads(p);
	}
	/* for all zones together: the most any zone whose period is known needs */
	struct meter_advice all = {false, 0, 0};
	for (size_t i = 0; i < p->nz; i++) {
		struct pzone *z = &p->z[i];
		meter_analyze(&z->s, z->is_power, strcmp(p->mode, "bus") ? z->wrap_uj : 0, &z->st);
		double lmax = lat_q(z, 1);
		meter_suggest(&z->st, isfinite(lmax) ? lmax : 0, &z->adv);
		if (!z->adv.known)
			continue;
		all.known = true;
		if (z->adv.interval_s > all.interval_s)
			all.interval_s = z->adv.interval_s;
		if (z->adv.max_lag_s > all.max_lag_s)
			all.max_lag_s = z->adv.max_lag_s;
	}
	if (o.json)
		rc = print_json(p, &all);
	else {
		print_text(p, &all);
		rc = 0;
	}
out:
	for (size_t i = 0; i < p->nz; i++) {
		series_free(&p->z[i].s);
		free(p->z[i].lat_s);
	}
	free(p->z);
	for (unsigned i = 0; i < p->nsets; i++)
		pd_set_destroy(&p->sets[i]);
	cli_pd_opts_free(&p->r);
	free(p);
	return rc;
}
