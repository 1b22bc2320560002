/*
 * The /metrics text (Prometheus exposition format 0.0.4): Kepler's metric names,
 * types and label sets (docs/exportd.md has the table), then wattbus_* pipeline
 * health. Labels are rendered once per workload (accum.c), so a scrape is mostly
 * memcpy and integer formatting.
 */
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "exportd.h"

const char *const ex_level_names[EX_NLEVELS] = {"node", "process", "container", "pod", "vm"};

/*
 * The bit set of the names in a list key (key) whose values are table's n names (a what each);
 * -1 with err naming the value and the choices for any other.
 */
static int names_parse(const struct wb_strlist *names, const char *const *table, int n,
		       const char *key, const char *what, unsigned *out, char *err, size_t errlen)
{
	unsigned set = 0;
	for (size_t i = 0; i < names->n; i++) {
		int k = 0;
		while (k < n && strcmp(names->v[i], table[k]))
			k++;
		if (k == n) {
			char choices[128] = "";
			for (int j = 0; j < n; j++)
				snprintf(choices + strlen(choices),
					 sizeof(choices) - strlen(choices), "%s%s", j ? ", " : "",
					 table[j]);
			snprintf(err, errlen, "%s: unknown %s \"%s\" (%s)", key, what, names->v[i],
				 choices);
			return -1;
		}
		set |= 1u << k;
	}
	*out = set;
	return 0;
}

int levels_parse(const struct wb_strlist *names, unsigned *levels, char *err, size_t errlen)
{
	return names_parse(names, ex_level_names, EX_NLEVELS, "levels", "level", levels, err,
			   errlen);
}

const char *const ex_profile_names[EX_NPROFILES] = {"kepler", "kepler-0.9"};

int profiles_parse(const struct wb_strlist *names, unsigned *profiles, char *err, size_t errlen)
{
	if (names_parse(names, ex_profile_names, EX_NPROFILES, "metrics", "profile", profiles, err,
			errlen) < 0)
		return -1;
	if (!*profiles) {
		snprintf(err, errlen, "metrics: no profile (kepler, kepler-0.9)");
		return -1;
	}
	return 0;
}

#define NO_LEVEL EX_NLEVELS

bool render_wanted(const struct render_filter *f, const char *metric, enum ex_level level)
{
	if (level < EX_NLEVELS && !(f->levels & (1u << level)))
		return false;
	if (f->deny)
		for (size_t i = 0; i < f->deny->n; i++)
			if (fnmatch(f->deny->v[i], metric, 0) == 0)
				return false;
	if (!f->allow || f->allow->n == 0)
		return true;
	for (size_t i = 0; i < f->allow->n; i++)
		if (fnmatch(f->allow->v[i], metric, 0) == 0)
			return true;
	return false;
}

bool render_family(struct render_ctx *c, const char *name, const char *type, const char *help,
		   enum ex_level level)
{
	if (!render_wanted(c->f, name, level))
		return false;
	c->name = name;
	c->namelen = strlen(name);
	rbuf_puts(c->b, "# HELP ");
	rbuf_put(c->b, name, c->namelen);
	rbuf_putc(c->b, ' ');
	rbuf_puts(c->b, help);
	rbuf_puts(c->b, "\n# TYPE ");
	rbuf_put(c->b, name, c->namelen);
	rbuf_putc(c->b, ' ');
	rbuf_puts(c->b, type);
	rbuf_putc(c->b, '\n');
	return true;
}

/* name{ ... : the caller appends labels, then calls end_* */
void render_begin(struct render_ctx *c)
{
	rbuf_put(c->b, c->name, c->namelen);
	rbuf_putc(c->b, '{');
}

void render_end_fixed(struct render_ctx *c, uint64_t v, unsigned decimals)
{
	rbuf_put(c->b, "} ", 2);
	rbuf_fixed(c->b, v, decimals);
	rbuf_putc(c->b, '\n');
}

/* A sample without labels, in fixed point (decimals 6: microjoules as joules). */
static void plain(struct render_ctx *c, uint64_t v, unsigned decimals)
{
	rbuf_put(c->b, c->name, c->namelen);
	rbuf_putc(c->b, ' ');
	rbuf_fixed(c->b, v, decimals);
	rbuf_putc(c->b, '\n');
}

static void end_double(struct render_ctx *c, double v)
{
	rbuf_put(c->b, "} ", 2);
	rbuf_double(c->b, v);
	rbuf_putc(c->b, '\n');
}

/* Energy over the slot as microwatts: uJ * 1e9 / ns. */
static uint64_t micro_watts(uint64_t slot_uj, uint64_t slot_ns)
{
	if (!slot_ns)
		return 0;
	return (uint64_t)((unsigned __int128)slot_uj * 1000000000u / slot_ns);
}

/* ---- node ---- */
enum zpart { Z_TOTAL, Z_ACTIVE, Z_IDLE };

/* Whether any host has a GPU zone: the GPU families are left out otherwise. */
static bool any_gpu(const struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	for (size_t i = 0; i < a->nhosts; i++)
		for (size_t z = 0; z < a->hosts[i]->nzones; z++)
			if (a->hosts[i]->zones[z].gpu)
				return true;
	return false;
}

/* A GPU's labels on every node GPU family, as Kepler's: gpu (its index), gpu_uuid, gpu_name,
 * vendor. */
static void gpu_labels(struct render_ctx *c, const struct ex_zone *xz)
{
	char idx[24];
	snprintf(idx, sizeof idx, "%llu", (unsigned long long)xz->index);
	rbuf_label(c->b, false, "gpu", idx, sizeof idx);
	rbuf_label(c->b, false, "gpu_uuid", xz->uuid, sizeof xz->uuid);
	rbuf_label(c->b, false, "gpu_name", xz->model, sizeof xz->model);
	rbuf_label(c->b, false, "vendor", xz->vendor, sizeof xz->vendor);
}

/* A node zone's labels after node_name: zone and path, or a GPU's. */
static void zone_labels(struct render_ctx *c, const struct ex_zone *xz)
{
	if (xz->gpu) {
		gpu_labels(c, xz);
		return;
	}
	rbuf_putc(c->b, ',');
	rbuf_puts(c->b, xz->labels);
}

/* The zones of one family: the CPU and platform zones, or (gpu) the GPUs. */
static void node_zone_family(struct render_ctx *c, const char *name, const char *help, bool watts,
			     enum zpart part, bool gpu)
{
	if (!render_family(c, name, watts ? "gauge" : "counter", help, EX_NODE))
		return;
	const struct accum *a = c->in->acc;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		for (size_t z = 0; z < h->nzones; z++) {
			const struct ex_zone *xz = &h->zones[z];
			if (xz->gpu != gpu)
				continue;
			render_begin(c);
			rbuf_puts(c->b, h->node_label);
			zone_labels(c, xz);
			if (!watts) {
				uint64_t v = part == Z_TOTAL	? xz->total_uj
					     : part == Z_ACTIVE ? xz->active_uj
								: xz->idle_uj;
				render_end_fixed(c, v, 6);
				continue;
			}
			uint64_t v = 0;
			if (xz->slot_t1 == h->last_t1)
				v = part == Z_TOTAL    ? xz->slot_total_uj
				    : part == Z_ACTIVE ? xz->slot_active_uj
						       : xz->slot_idle_uj;
			render_end_fixed(c, micro_watts(v, h->slot_ns), 6);
		}
	}
}

/* The node families with one series per zone: the CPU and platform zones', and the GPUs'. */
static const struct zone_row {
	const char *name, *help;
	bool watts, gpu;
	enum zpart part;
} zone_rows[] = {
    {"kepler_node_cpu_joules_total", "Energy consumption of cpu at node level in joules", false,
     false, Z_TOTAL},
    {"kepler_node_cpu_active_joules_total",
     "Energy consumption of cpu in active state at node level in joules", false, false, Z_ACTIVE},
    {"kepler_node_cpu_idle_joules_total",
     "Energy consumption of cpu in idle state at node level in joules", false, false, Z_IDLE},
    {"kepler_node_cpu_watts", "Power consumption of cpu at node level in watts", true, false,
     Z_TOTAL},
    {"kepler_node_cpu_active_watts",
     "Power consumption of cpu in active state at node level in watts", true, false, Z_ACTIVE},
    {"kepler_node_cpu_idle_watts", "Power consumption of cpu in idle state at node level in watts",
     true, false, Z_IDLE},
    {"kepler_node_gpu_joules_total", "Total energy consumption of GPU at node level in joules",
     false, true, Z_TOTAL},
    {"kepler_node_gpu_active_joules_total",
     "Energy consumption of GPU in active state at node level in joules", false, true, Z_ACTIVE},
    {"kepler_node_gpu_idle_joules_total",
     "Energy consumption of GPU in idle state at node level in joules", false, true, Z_IDLE},
    {"kepler_node_gpu_watts", "Total power consumption of GPU at node level in watts", true, true,
     Z_TOTAL},
    {"kepler_node_gpu_active_watts",
     "Power consumption of GPU in active state at node level in watts", true, true, Z_ACTIVE},
};

static void zone_families(struct render_ctx *c, bool gpu)
{
	for (size_t i = 0; i < sizeof zone_rows / sizeof zone_rows[0]; i++)
		if (zone_rows[i].gpu == gpu)
			node_zone_family(c, zone_rows[i].name, zone_rows[i].help,
					 zone_rows[i].watts, zone_rows[i].part, gpu);
}

/*
 * The labels Kepler's platform collector puts on kepler_platform_watts, from the zone's path
 * as powerd wrote it: a Redfish URL with the reading's JSON pointer
 * (https://BMC/redfish/v1/Chassis/ID/Power#/PowerControl/MEMBER), ipmi://BMC/dcmi, or a
 * sysfs file (an ACPI power meter through hwmon).
 */
struct platform_labels {
	char source[16], bmc_id[128], chassis_id[128], power_control_id[64];
};

static void copy_until(char *dst, size_t size, const char *src, const char *stops)
{
	size_t n = strcspn(src, stops);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void render_platform_labels(const char *path, struct platform_labels *l)
{
	memset(l, 0, sizeof(*l));
	const char *rest = NULL;
	if (!strncmp(path, "https://", 8) || !strncmp(path, "http://", 7)) {
		snprintf(l->source, sizeof l->source, "redfish");
		rest = strstr(path, "://") + 3;
	} else if (!strncmp(path, "ipmi://", 7)) {
		snprintf(l->source, sizeof l->source, "ipmi");
		rest = path + 7;
	} else if (!strncmp(path, "/sys/", 5)) {
		snprintf(l->source, sizeof l->source, "hwmon");
		return;
	} else {
		return;
	}
	copy_until(l->bmc_id, sizeof l->bmc_id, rest, "/#");
	const char *ch = strstr(rest, "/Chassis/");
	if (ch)
		copy_until(l->chassis_id, sizeof l->chassis_id, ch + 9, "/#");
	const char *pc = strstr(rest, "#/PowerControl/");
	if (pc)
		copy_until(l->power_control_id, sizeof l->power_control_id, pc + 15, "/");
}

/* Kepler's kepler_platform_watts, one series per platform zone (a BMC's PowerControl entry). */
static void platform_metrics(struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	bool any = false;
	for (size_t i = 0; i < a->nhosts; i++)
		any |= a->hosts[i]->nplat > 0;
	if (!any || !render_family(
			c, "kepler_platform_watts", "gauge",
			"Current platform power consumption in watts from BMC PowerControl entries",
			EX_NODE))
		return;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		for (size_t p = 0; p < h->nplat; p++) {
			const struct ex_platform *xp = &h->plat[p];
			struct platform_labels l;
			render_platform_labels(xp->path, &l);
			render_begin(c);
			rbuf_label(c->b, true, "source", l.source, sizeof l.source);
			rbuf_putc(c->b, ',');
			rbuf_puts(c->b, h->node_label);
			rbuf_label(c->b, false, "bmc_id", l.bmc_id, sizeof l.bmc_id);
			rbuf_label(c->b, false, "chassis_id", l.chassis_id, sizeof l.chassis_id);
			rbuf_label(c->b, false, "power_control_id", l.power_control_id,
				   sizeof l.power_control_id);
			rbuf_label(c->b, false, "power_control_name", "", 1);
			uint64_t v = xp->slot_t1 == h->last_t1 ? xp->slot_uj : 0;
			render_end_fixed(c, micro_watts(v, h->slot_ns), 6);
		}
	}
}

/* Kepler's node GPU families (kepler_node_gpu_*). */
static void node_gpu_metrics(struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	if (render_family(c, "kepler_node_gpu_info", "gauge",
			  "GPU device information for mapping index to UUID/name", EX_NODE)) {
		for (size_t i = 0; i < a->nhosts; i++) {
			const struct ex_host *h = a->hosts[i];
			for (size_t z = 0; z < h->nzones; z++) {
				const struct ex_zone *xz = &h->zones[z];
				if (!xz->gpu)
					continue;
				render_begin(c);
				rbuf_puts(c->b, h->node_label);
				gpu_labels(c, xz);
				rbuf_put(c->b, "} 1\n", 4);
			}
		}
	}
	zone_families(c, true);
	if (render_family(
		c, "kepler_node_gpu_idle_watts", "gauge",
		"Idle power consumption of GPU at node level in watts (configured, or the lowest seen with no compute process)",
		EX_NODE)) {
		for (size_t i = 0; i < a->nhosts; i++) {
			const struct ex_host *h = a->hosts[i];
			for (size_t z = 0; z < h->nzones; z++) {
				const struct ex_zone *xz = &h->zones[z];
				if (!xz->gpu)
					continue;
				render_begin(c);
				rbuf_puts(c->b, h->node_label);
				gpu_labels(c, xz);
				end_double(c, xz->idle_w);
			}
		}
	}
}

static void node_metrics(struct render_ctx *c)
{
	zone_families(c, false);
	if (any_gpu(c))
		node_gpu_metrics(c);
	const struct accum *a = c->in->acc;
	if (render_family(c, "kepler_node_cpu_usage_ratio", "gauge",
			  "CPU usage ratio of a node (value between 0.0 and 1.0)", EX_NODE)) {
		for (size_t i = 0; i < a->nhosts; i++) {
			render_begin(c);
			rbuf_puts(c->b, a->hosts[i]->node_label);
			end_double(c, a->hosts[i]->cpu_usage_ratio);
		}
	}
	if (c->in->ncpus && render_family(c, "kepler_node_cpu_info", "gauge",
					  "CPU information from procfs", EX_NODE)) {
		/* like Kepler's collector: no node_name here */
		for (size_t i = 0; i < c->in->ncpus; i++) {
			const struct wb_cpuinfo_cpu *e = &c->in->cpus[i];
			render_begin(c);
			rbuf_label(c->b, true, "processor", e->processor, sizeof e->processor);
			rbuf_label(c->b, false, "vendor_id", e->vendor_id, sizeof e->vendor_id);
			rbuf_label(c->b, false, "model_name", e->model_name, sizeof e->model_name);
			rbuf_label(c->b, false, "physical_id", e->physical_id,
				   sizeof e->physical_id);
			rbuf_label(c->b, false, "core_id", e->core_id, sizeof e->core_id);
			rbuf_put(c->b, "} 1\n", 4);
		}
	}
}

/* ---- workloads ---- */
static void work_prefix(struct render_ctx *c, const struct ex_host *h, const struct ex_work *w)
{
	render_begin(c);
	rbuf_puts(c->b, h->node_label);
	rbuf_putc(c->b, ',');
	rbuf_puts(c->b, w->labels);
}

static void work_state(struct render_ctx *c, const struct ex_work *w)
{
	rbuf_puts(c->b, w->terminated ? ",state=\"terminated\"" : ",state=\"running\"");
}

/*
 * A workload's GPU energy, summed over the GPUs it ran on, as Kepler's one series per workload
 * (no gpu label): only once it got some, and its watts only while it uses a GPU (power > 0 in
 * the last slot), as Kepler has them.
 */
static void work_gpu_sample(struct render_ctx *c, const struct ex_host *h, const struct ex_work *w,
			    bool watts)
{
	uint64_t total = 0, slot = 0;
	for (size_t z = 0; z < w->nz && z < h->nkinds; z++)
		if (h->kinds[z].gpu) {
			total += w->uj[z];
			slot += w->uj[w->nz + z];
		}
	if (watts)
		slot = w->last_t1 == h->last_t1 ? micro_watts(slot, h->slot_ns) : 0;
	if ((watts ? slot : total) == 0)
		return;
	work_prefix(c, h, w);
	work_state(c, w);
	render_end_fixed(c, watts ? slot : total, 6);
}

static void work_energy_family(struct render_ctx *c, enum ex_level level, const char *name,
			       const char *help, bool watts, bool gpu)
{
	if (!render_family(c, name, watts ? "gauge" : "counter", help, level))
		return;
	const struct accum *a = c->in->acc;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		const struct ex_wmap *m = &h->works[level];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
		     s = wb_table_next(&m->tab, s)) {
			const struct ex_work *w = s->w;
			if (!w->labels)
				continue;
			if (gpu) {
				work_gpu_sample(c, h, w, watts);
				continue;
			}
			bool in_last = w->last_t1 == h->last_t1;
			for (size_t z = 0; z < w->nz && z < h->nkinds; z++) {
				/* platform energy is not the workloads' (estimd's
				 * attribute_platform off): no series of zeros for it, as Kepler has
				 * none */
				if (h->kinds[z].gpu || (w->uj[z] == 0 && h->kinds[z].platform))
					continue;
				work_prefix(c, h, w);
				work_state(c, w);
				rbuf_putc(c->b, ',');
				rbuf_puts(c->b, h->kinds[z].zlabel);
				if (watts)
					render_end_fixed(
					    c,
					    in_last ? micro_watts(w->uj[w->nz + z], h->slot_ns) : 0,
					    6);
				else
					render_end_fixed(c, w->uj[z], 6);
			}
		}
	}
}

static void work_seconds_family(struct render_ctx *c, enum ex_level level, const char *name,
				const char *help)
{
	if (!render_family(c, name, "counter", help, level))
		return;
	const struct accum *a = c->in->acc;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		const struct ex_wmap *m = &h->works[level];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
		     s = wb_table_next(&m->tab, s)) {
			const struct ex_work *w = s->w;
			if (!w->labels)
				continue;
			work_prefix(c, h, w);
			/* a process's CPU time has no state in Kepler; a container's has */
			if (level == EX_CONTAINER)
				rbuf_puts(c->b, w->terminated ? ",state=\"terminated\""
							      : ",state=\"running\"");
			render_end_fixed(c, w->cpu_ns, 9);
		}
	}
}

static void workload_metrics(struct render_ctx *c)
{
	static const struct {
		enum ex_level level;
		const char *joules, *watts, *seconds, *gpu_joules, *gpu_watts;
	} fam[] = {
	    {EX_PROCESS, "kepler_process_cpu_joules_total", "kepler_process_cpu_watts",
	     "kepler_process_cpu_seconds_total", "kepler_process_gpu_joules_total",
	     "kepler_process_gpu_watts"},
	    {EX_CONTAINER, "kepler_container_cpu_joules_total", "kepler_container_cpu_watts",
	     "kepler_container_cpu_seconds_total", "kepler_container_gpu_joules_total",
	     "kepler_container_gpu_watts"},
	    {EX_VM, "kepler_vm_cpu_joules_total", "kepler_vm_cpu_watts", NULL, NULL, NULL},
	    {EX_POD, "kepler_pod_cpu_joules_total", "kepler_pod_cpu_watts", NULL,
	     "kepler_pod_gpu_joules_total", "kepler_pod_gpu_watts"},
	};
	bool gpu = any_gpu(c);
	char help[96];
	for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
		const char *lv = ex_level_names[fam[i].level];
		snprintf(help, sizeof help, "Energy consumption of cpu at %s level in joules", lv);
		work_energy_family(c, fam[i].level, fam[i].joules, help, false, false);
		snprintf(help, sizeof help, "Power consumption of cpu at %s level in watts", lv);
		work_energy_family(c, fam[i].level, fam[i].watts, help, true, false);
		if (gpu && fam[i].gpu_joules) {
			snprintf(help, sizeof help,
				 "Total energy consumption of %s on GPU in joules", lv);
			work_energy_family(c, fam[i].level, fam[i].gpu_joules, help, false, true);
			snprintf(help, sizeof help, "Power consumption of %s on GPU in watts", lv);
			work_energy_family(c, fam[i].level, fam[i].gpu_watts, help, true, true);
		}
		if (fam[i].seconds) {
			snprintf(help, sizeof help,
				 "Total user and system time of cpu at %s level in seconds", lv);
			work_seconds_family(c, fam[i].level, fam[i].seconds, help);
		}
	}
}

static void build_info(struct render_ctx *c)
{
	const struct render_input *in = c->in;
	if (!render_family(c, "kepler_build_info", "gauge",
			   "A metric with a constant '1' value labeled with version information",
			   NO_LEVEL))
		return;
	render_begin(c);
	rbuf_label(c->b, true, "arch", in->arch ? in->arch : "", 64);
	rbuf_label(c->b, false, "branch", in->branch ? in->branch : "", 64);
	rbuf_label(c->b, false, "revision", in->revision ? in->revision : "", 64);
	rbuf_label(c->b, false, "version", in->version ? in->version : "", 64);
	/* Kepler's schema has goversion; a C build reports its compiler there */
	rbuf_label(c->b, false, "goversion", in->compiler ? in->compiler : "", 64);
	rbuf_put(c->b, "} 1\n", 4);
}

/* ---- wattbus_*: pipeline health ---- */
static void stage_begin(struct render_ctx *c, const struct stage_rec *r)
{
	render_begin(c);
	rbuf_puts(c->b, r->labels);
}

/*
 * The per-stage families with one number each: a row names the family and where the number
 * is in struct stage_rec (a plain count, or a counter kept monotonic across restarts).
 */
enum stage_value { SV_UP, SV_AGE, SV_U64, SV_MONO };
static const struct stage_row {
	const char *name, *type, *help;
	enum stage_value kind;
	size_t off;
	unsigned decimals; /* 9: nanoseconds shown as seconds */
} stage_rows[] = {
    {"wattbus_stage_up", "gauge",
     "1 when the stage's last stat message is younger than stage_timeout", SV_UP, 0, 0},
    {"wattbus_stage_last_message_age_seconds", "gauge",
     "Seconds since the stage's last stat message", SV_AGE, 0, 9},
    {"wattbus_stage_uptime_seconds", "gauge", "Seconds since the stage started", SV_U64,
     offsetof(struct stage_rec, uptime_ns), 9},
    {"wattbus_stage_starts_total", "counter", "Stage starts (epochs) seen by exportd", SV_U64,
     offsetof(struct stage_rec, starts), 0},
    {"wattbus_stage_frames_in_total", "counter", "Frames the stage received", SV_MONO,
     offsetof(struct stage_rec, frames_in), 0},
    {"wattbus_stage_frames_out_total", "counter", "Frames the stage published", SV_MONO,
     offsetof(struct stage_rec, frames_out), 0},
    {"wattbus_stage_messages_lost_total", "counter",
     "Upstream messages the stage missed (sequence gaps)", SV_MONO,
     offsetof(struct stage_rec, lost), 0},
    {"wattbus_stage_upstream_restarts_total", "counter",
     "New upstream epochs (producer restarts) the stage saw", SV_MONO,
     offsetof(struct stage_rec, restarts), 0},
    {"wattbus_stage_cpu_seconds_total", "counter", "CPU time (user + system) of the stage", SV_MONO,
     offsetof(struct stage_rec, cpu_ns), 9},
    {"wattbus_stage_resident_memory_bytes", "gauge", "Resident set size of the stage", SV_U64,
     offsetof(struct stage_rec, rss_bytes), 0},
    {"wattbus_stage_checkpoint_failures_total", "counter",
     "State file saves that failed; a crash after one loses the energy not saved", SV_MONO,
     offsetof(struct stage_rec, checkpoint_failures), 0},
};

static uint64_t stage_value(const struct render_ctx *c, const struct stage_row *row,
			    const struct stage_rec *r)
{
	uint64_t age = c->in->now_ns > r->last_recv_ns ? c->in->now_ns - r->last_recv_ns : 0;
	const void *at = (const char *)r + row->off;
	switch (row->kind) {
	case SV_UP:
		return age <= c->in->stage_timeout_ns;
	case SV_AGE:
		return age;
	case SV_U64:
		return *(const uint64_t *)at;
	case SV_MONO:
		return mono_value(at);
	}
	return 0;
}

static void stage_metrics(struct render_ctx *c)
{
	const struct stages *st = c->in->st;
	for (size_t k = 0; k < sizeof stage_rows / sizeof stage_rows[0]; k++) {
		const struct stage_row *row = &stage_rows[k];
		if (!render_family(c, row->name, row->type, row->help, NO_LEVEL))
			continue;
		for (size_t i = 0; i < st->n; i++) {
			stage_begin(c, st->recs[i]);
			render_end_fixed(c, stage_value(c, row, st->recs[i]), row->decimals);
		}
	}
	if (render_family(c, "wattbus_stage_info", "gauge",
			  "Version and mode of each stage, value 1", NO_LEVEL)) {
		for (size_t i = 0; i < st->n; i++) {
			const struct stage_rec *r = st->recs[i];
			stage_begin(c, r);
			rbuf_label(c->b, false, "version", r->version, sizeof r->version);
			rbuf_label(c->b, false, "mode", r->mode, sizeof r->mode);
			rbuf_put(c->b, "} 1\n", 4);
		}
	}
	if (render_family(c, "wattbus_stage_messages_rejected_total", "counter",
			  "Messages the stage rejected, by reason", NO_LEVEL)) {
		for (size_t i = 0; i < st->n; i++) {
			const struct stage_rec *r = st->recs[i];
			uint64_t named = 0;
			for (size_t k = 0; k < r->nreasons; k++) {
				named += mono_value(&r->reasons[k].m);
				stage_begin(c, r);
				rbuf_label(c->b, false, "reason", r->reasons[k].name,
					   sizeof r->reasons[k].name);
				render_end_fixed(c, mono_value(&r->reasons[k].m), 0);
			}
			uint64_t total = mono_value(&r->rejected);
			stage_begin(c, r);
			rbuf_put(c->b, ",reason=\"other\"", 15);
			render_end_fixed(c, total > named ? total - named : 0, 0);
		}
	}
	if (render_family(c, "wattbus_stage_events_total", "counter",
			  "Stage-specific counters, by name", NO_LEVEL)) {
		for (size_t i = 0; i < st->n; i++) {
			const struct stage_rec *r = st->recs[i];
			for (size_t k = 0; k < r->ncounters; k++) {
				stage_begin(c, r);
				rbuf_label(c->b, false, "name", r->counters[k].name,
					   sizeof r->counters[k].name);
				render_end_fixed(c, mono_value(&r->counters[k].m), 0);
			}
		}
	}
}

static void by_reason(struct render_ctx *c, const char *label, const char *value, uint64_t v)
{
	render_begin(c);
	rbuf_label(c->b, true, label, value, 64);
	render_end_fixed(c, v, 0);
}

/*
 * exportd's own families with one number each (ACC: in struct accum, CTR: in struct
 * exportd_counters; decimals 6: microjoules shown as joules) and those with one number per
 * workload level.
 */
enum ex_base { ACC, CTR };
static const struct ex_row {
	const char *name, *type, *help;
	enum ex_base base;
	size_t off;
	unsigned decimals;
} ex_rows[] =
    {
	{"wattbus_exportd_slots_clipped_total", "counter",
	 "Slots that overlapped the previous slot of their host; only the new part was counted",
	 ACC, offsetof(struct accum, clipped), 0},
	{"wattbus_exportd_slots_recovered_total", "counter",
	 "Slots whose node totals carried the energy of estimates never received", ACC,
	 offsetof(struct accum, recovered), 0},
	{"wattbus_exportd_recovered_joules_total", "counter",
	 "Node energy of estimates never received, counted from the totals of the next", ACC,
	 offsetof(struct accum, recovered_uj), 6},
	{"wattbus_exportd_totals_implausible_total", "counter",
	 "Zones whose estimd totals stepped by more than max_zone_w since the last slot applied; the slot's own energy counted",
	 ACC, offsetof(struct accum, totals_implausible), 0},
	{"wattbus_exportd_slots_underattributed_total", "counter",
	 "Slots whose workloads and unattributed energy summed to less than the active energy", ACC,
	 offsetof(struct accum, underattributed), 0},
	{"wattbus_exportd_hosts_forgotten_total", "counter",
	 "Hosts silent longer than stale_after/terminated_ttl whose place went to a new host", ACC,
	 offsetof(struct accum, evicted_hosts), 0},
	{"wattbus_exportd_pids_reused_total", "counter",
	 "Processes that took over the series of an earlier process with the same pid", ACC,
	 offsetof(struct accum, pid_reused), 0},
	{"wattbus_exportd_zones_forgotten_total", "counter",
	 "Zones silent longer than stale_after/terminated_ttl whose place went to a new zone", ACC,
	 offsetof(struct accum, evicted_zones), 0},
	{"wattbus_exportd_http_connections", "gauge",
	 "HTTP connections open, this scrape's included", CTR,
	 offsetof(struct exportd_counters, http.connections), 0},
	{"wattbus_exportd_http_connections_refused_total", "counter",
	 "Connections refused because only reserved_connections were left and the address held one already",
	 CTR, offsetof(struct exportd_counters, http.refused), 0},
	{"wattbus_exportd_http_request_timeouts_total", "counter",
	 "Connections closed because their request was not received and answered within http_request_timeout",
	 CTR, offsetof(struct exportd_counters, http.request_timeouts), 0},
	{"wattbus_exportd_auth_failures_total", "counter",
	 "Requests for /metrics with a wrong user or password", CTR,
	 offsetof(struct exportd_counters, http.auth_failures), 0},
	{"wattbus_exportd_auth_throttled_total", "counter",
	 "Requests answered 429 because their address served a penalty for wrong passwords", CTR,
	 offsetof(struct exportd_counters, http.auth_throttled), 0},
},
  ex_level_rows[] = {
      {"wattbus_exportd_series", "gauge", "Workload series exported, by level", ACC,
       offsetof(struct accum, series), 0},
      {"wattbus_exportd_series_dropped_total", "counter",
       "Workload series refused by max_series, counted in every slot the workload ran in", ACC,
       offsetof(struct accum, dropped), 0},
      {"wattbus_exportd_workloads_evicted_total", "counter",
       "Terminated workloads removed (terminated_ttl, max_terminated, max_series)", ACC,
       offsetof(struct accum, evicted), 0},
};

/* Where a row's number is, or NULL when its struct is not there (no counters in unit tests). */
static const uint64_t *ex_value(const struct render_ctx *c, const struct ex_row *row)
{
	const void *base = row->base == ACC ? (const void *)c->in->acc : (const void *)c->in->ctr;
	return base ? (const uint64_t *)((const char *)base + row->off) : NULL;
}

static void exportd_metrics(struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	const struct exportd_counters *k = c->in->ctr;
	if (render_family(c, "wattbus_exportd_estimates_total", "counter",
			  "Estimates applied, by host", NO_LEVEL))
		for (size_t i = 0; i < a->nhosts; i++)
			by_reason(c, "host", a->hosts[i]->name, a->hosts[i]->estimates);
	if (render_family(c, "wattbus_exportd_estimate_age_seconds", "gauge",
			  "Seconds since the last estimate of the host was applied", NO_LEVEL)) {
		for (size_t i = 0; i < a->nhosts; i++) {
			const struct ex_host *h = a->hosts[i];
			render_begin(c);
			rbuf_label(c->b, true, "host", h->name, sizeof h->name);
			render_end_fixed(
			    c,
			    c->in->now_ns > h->last_recv_ns ? c->in->now_ns - h->last_recv_ns : 0,
			    9);
		}
	}
	if (render_family(c, "wattbus_exportd_estimates_rejected_total", "counter",
			  "Estimates not applied, by reason (stale: a slot already applied)",
			  NO_LEVEL))
		for (int r = 0; r < ACC_R_COUNT; r++)
			by_reason(c, "reason", accum_reason_name((enum accum_reason)r),
				  a->rejected[r]);
	if (render_family(c, "wattbus_exportd_stats_rejected_total", "counter",
			  "Stat messages not applied, by reason", NO_LEVEL))
		for (int r = 0; r < ST_R_COUNT; r++)
			by_reason(c, "reason", stages_reason_name((enum stages_reason)r),
				  c->in->st->rejected[r]);
	for (size_t i = 0; i < sizeof ex_rows / sizeof ex_rows[0]; i++) {
		const uint64_t *v = ex_value(c, &ex_rows[i]);
		if (v &&
		    render_family(c, ex_rows[i].name, ex_rows[i].type, ex_rows[i].help, NO_LEVEL))
			plain(c, *v, ex_rows[i].decimals);
	}
	for (size_t i = 0; i < sizeof ex_level_rows / sizeof ex_level_rows[0]; i++) {
		const uint64_t *v = ex_value(c, &ex_level_rows[i]);
		if (render_family(c, ex_level_rows[i].name, ex_level_rows[i].type,
				  ex_level_rows[i].help, NO_LEVEL))
			for (int l = EX_PROCESS; l < EX_NLEVELS; l++)
				by_reason(c, "level", ex_level_names[l], v[l]);
	}
	if (a->kube &&
	    render_family(
		c, "wattbus_exportd_kube_names", "gauge",
		"Pods and containers whose names the last good kubelet or API server answer gave",
		NO_LEVEL)) {
		by_reason(c, "kind", "pod", kube_names_npods(a->kube));
		by_reason(c, "kind", "container", kube_names_ncontainers(a->kube));
	}
	if (k && render_family(c, "wattbus_exportd_http_requests_total", "counter",
			       "HTTP requests answered, by status class", NO_LEVEL)) {
		static const char *const cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
		for (int i = 0; i < 6; i++)
			by_reason(c, "code", cls[i], k->http.requests[i]);
	}
	if (k && render_family(c, "wattbus_exportd_render_seconds", "gauge",
			       "Time the previous /metrics took to render", NO_LEVEL)) {
		rbuf_put(c->b, c->name, c->namelen);
		rbuf_putc(c->b, ' ');
		rbuf_double(c->b, k->last_render_s);
		rbuf_putc(c->b, '\n');
	}
}

void render_metrics(const struct render_input *in, const struct render_filter *f, struct rbuf *out)
{
	struct render_ctx c = {.in = in, .f = f, .b = out};
	unsigned prof = f->profiles ? f->profiles : 1u << EX_PROF_KEPLER;
	if (prof & (1u << EX_PROF_KEPLER)) {
		if (in->acc) {
			node_metrics(&c);
			platform_metrics(&c);
			workload_metrics(&c);
		}
		build_info(&c);
	}
	if (prof & (1u << EX_PROF_KEPLER09))
		render_kepler09(&c);
	if (in->st)
		stage_metrics(&c);
	if (in->acc && in->st)
		exportd_metrics(&c);
}
