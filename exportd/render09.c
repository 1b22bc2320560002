/*
 * Kepler 0.9's metric families (metrics = kepler-0.9), as its Grafana dashboards and
 * kepler-model-server's trainers query them: kepler_{node,process,container,vm}_<component>
 * _joules_total with mode and source, kepler_{process,container}_joules_total,
 * kepler_*_bpf_cpu_time_ms_total, kepler_node_info, kepler_node_node_info. Rendered from the
 * same accumulators as Kepler's >= 0.10 families (accum.c): a 0.9 family is a sum over the
 * zone kinds of one component, so at any scrape it adds up to its 0.10 counterpart.
 * docs/exportd.md has the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exportd.h"
#include "spec.h"

/* Kepler 0.9's components, in its order (pkg/metrics/consts: EnergyMetricNames). */
enum k9_comp { K9_PACKAGE, K9_CORE, K9_UNCORE, K9_DRAM, K9_OTHER, K9_GPU, K9_PLATFORM, K9_N };
static const char *const k9_names[K9_N] = {"package", "core", "uncore",	 "dram",
					   "other",   "gpu",  "platform"};

/* Whether one of the host's zones is a platform meter (a BMC, an ACPI power meter). */
static bool has_platform(const struct ex_host *h)
{
	for (size_t z = 0; z < h->nzones; z++)
		if (!h->zones[z].gpu && !strcmp(h->zones[z].zone, "platform"))
			return true;
	return false;
}

/*
 * The component a zone kind counts in, or -1 (a kind 0.9 has no family for: an hwmon meter of
 * another kind). RAPL's psys is the platform where no platform meter is, so that one figure
 * never counts twice in kepler_*_platform_joules_total. Kepler's "other" (platform minus the
 * components) is not a kind: the difference of two counters is not a counter.
 */
static int kind_comp(const struct ex_kind *k, bool platform_meter)
{
	if (k->gpu)
		return K9_GPU;
	for (int i = 0; i < K9_N; i++)
		if (i != K9_OTHER && i != K9_GPU && !strcmp(k->zone, k9_names[i]))
			return i;
	if (!strcmp(k->zone, "psys") && !platform_meter)
		return K9_PLATFORM;
	return -1;
}

static int zone_comp(const struct ex_host *h, const struct ex_zone *xz, bool platform_meter)
{
	return xz->gpu ? K9_GPU : kind_comp(&h->kinds[xz->kind], platform_meter);
}

/* Kepler 0.9's source label (its power source's GetName) of a zone, from its path. */
static const char *zone_source(const struct ex_zone *xz)
{
	const char *p = xz->path;
	if (xz->gpu)
		return "NVML";
	if (!p[0])
		return "trained_power_model"; /* estimd's model zones have no path */
	if (!strncmp(p, "https://", 8) || !strncmp(p, "http://", 7))
		return "redfish";
	if (!strncmp(p, "ipmi://", 7))
		return "ipmi";
	if (!strncmp(p, "/dev/cpu/", 9))
		return "rapl-msr";
	if (strstr(p, "powercap") || !strncmp(p, "aggregated-", 11))
		return "rapl-sysfs"; /* several sockets of one kind: RAPL's */
	if (!strncmp(p, "/sys/", 5))
		return "acpi"; /* an ACPI power meter through hwmon */
	/* powerd's fake source simulates RAPL's zones (package-0, core-0, dram-0) for hosts
	 * without a meter; 0.9's consumers (its trainers, power-source-comparison) know RAPL by
	 * this name. The 0.10 profile's path and powerd's mode="fake" say it is simulated. */
	if (!strncmp(p, "simulated:", 10))
		return "rapl-sysfs";
	return "wattbus";
}

/* Kepler 0.9's package label of a zone: the socket of a RAPL zone (intel-rapl:N[:M] -> N), the
 * index of a GPU, else the zone's path ("aggregated-package" for sockets summed). */
static void natural_package(const struct ex_zone *xz, char *out, size_t size)
{
	const char *r = strstr(xz->path, "intel-rapl:");
	if (xz->gpu)
		snprintf(out, size, "%llu", (unsigned long long)xz->index);
	else if (r)
		snprintf(out, size, "%.*s", (int)strspn(r + 11, "0123456789"), r + 11);
	else
		snprintf(out, size, "%s", xz->path);
}

/* The package label; a value an earlier zone of the same component has becomes the zone's path
 * (unique within a component), so no two series have the same labels. */
static void zone_package(const struct ex_host *h, size_t zi, bool platform_meter, char *out,
			 size_t size)
{
	const struct ex_zone *xz = &h->zones[zi];
	natural_package(xz, out, size);
	int comp = zone_comp(h, xz, platform_meter);
	for (size_t y = 0; y < zi; y++) {
		char other[sizeof xz->path];
		const struct ex_zone *yz = &h->zones[y];
		if (!yz->labels || zone_comp(h, yz, platform_meter) != comp)
			continue;
		natural_package(yz, other, sizeof other);
		if (!strcmp(other, out)) {
			snprintf(out, size, "%s", xz->path);
			return;
		}
	}
}

/* ---- node ---- */

/* Whether a host has an exported zone of a component. */
static bool host_has(const struct ex_host *h, int comp)
{
	bool pm = has_platform(h);
	for (size_t z = 0; z < h->nzones; z++)
		if (h->zones[z].labels && zone_comp(h, &h->zones[z], pm) == comp)
			return true;
	return false;
}

/*
 * Kepler 0.9 reads core, uncore, package and dram together per socket of the package zones
 * (components' GetAbsEnergyFromNodeComponents) and exports all four, 0 J for a zone the CPU
 * lacks; its trainers need every one (PowerSourceMap). So does this profile: a component a host
 * with package zones lacks is one 0 J series per package zone, with its package and source.
 */
static bool zero_comp(const struct ex_host *h, int comp)
{
	return (comp == K9_CORE || comp == K9_UNCORE || comp == K9_DRAM) && !host_has(h, comp) &&
	       host_has(h, K9_PACKAGE);
}

static void node_series(struct render_ctx *c, const struct ex_host *h, size_t z, bool pm, bool zero)
{
	const struct ex_zone *xz = &h->zones[z];
	char pkg[sizeof xz->path];
	zone_package(h, z, pm, pkg, sizeof pkg);
	for (int idle = 0; idle < 2; idle++) {
		render_begin(c);
		rbuf_puts(c->b, h->node_label);
		rbuf_label(c->b, false, "package", pkg, sizeof pkg);
		/* Kepler 0.9's instance: its node name */
		rbuf_label(c->b, false, "instance", h->name, sizeof h->name);
		rbuf_puts(c->b, idle ? ",mode=\"idle\"" : ",mode=\"dynamic\"");
		rbuf_label(c->b, false, "source", zone_source(xz), 32);
		render_end_fixed(c, zero ? 0 : idle ? xz->idle_uj : xz->active_uj, 6);
	}
}

static void node_family(struct render_ctx *c, int comp)
{
	const struct accum *a = c->in->acc;
	bool any = false;
	for (size_t i = 0; i < a->nhosts && !any; i++)
		any = host_has(a->hosts[i], comp) || zero_comp(a->hosts[i], comp);
	char name[64], help[96];
	snprintf(name, sizeof name, "kepler_node_%s_joules_total", k9_names[comp]);
	snprintf(help, sizeof help, "Aggregated value in %s value (Kepler 0.9)", k9_names[comp]);
	if (!any || !render_family(c, name, "counter", help, EX_NODE))
		return;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		bool pm = has_platform(h), zero = zero_comp(h, comp);
		for (size_t z = 0; z < h->nzones; z++)
			if (h->zones[z].labels &&
			    zone_comp(h, &h->zones[z], pm) == (zero ? K9_PACKAGE : comp))
				node_series(c, h, z, pm, zero);
	}
}

/* The exported machine's CPUs, as kepler_node_cpu_info shows them: Kepler's machine spec. */
struct k9_spec {
	char vendor[64], processor[128];
	unsigned cores, chips, threads_per_core;
};

static void cpu_spec(const struct render_input *in, struct k9_spec *s)
{
	memset(s, 0, sizeof *s);
	if (!in->ncpus)
		return;
	struct wb_cpuinfo_facts f;
	wb_cpuinfo_facts(in->cpus, in->ncpus, &f);
	/* Kepler's formatVendor: the first word, lower case */
	size_t n = strcspn(f.vendor_id, " \t");
	for (size_t i = 0; i < n && i + 1 < sizeof s->vendor; i++)
		s->vendor[i] = (char)(f.vendor_id[i] >= 'A' && f.vendor_id[i] <= 'Z'
					  ? f.vendor_id[i] - 'A' + 'a'
					  : f.vendor_id[i]);
	wb_processor_name(f.model_name, s->processor, sizeof s->processor);
	s->cores = (unsigned)f.cpus;
	s->chips = (unsigned)f.sockets;
	s->threads_per_core = f.cores ? (unsigned)(f.cpus / f.cores) : 0;
}

static void node_info(struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	struct k9_spec s;
	cpu_spec(c->in, &s);
	if (render_family(c, "kepler_node_info", "gauge", "Labeled node information (Kepler 0.9)",
			  EX_NODE)) {
		for (size_t i = 0; i < a->nhosts; i++) {
			const struct ex_host *h = a->hosts[i];
			bool pm = has_platform(h);
			const char *comp_src = "", *plat_src = "";
			for (size_t z = 0; z < h->nzones; z++) {
				int comp = h->zones[z].labels ? zone_comp(h, &h->zones[z], pm) : -1;
				if (comp == K9_PACKAGE && !comp_src[0])
					comp_src = zone_source(&h->zones[z]);
				if (comp == K9_PLATFORM && !plat_src[0])
					plat_src = zone_source(&h->zones[z]);
			}
			render_begin(c);
			rbuf_puts(c->b, h->node_label);
			rbuf_label(c->b, false, "cpu_architecture", s.processor,
				   sizeof s.processor);
			rbuf_label(c->b, false, "components_power_source", comp_src, 32);
			rbuf_label(c->b, false, "platform_power_source", plat_src, 32);
			rbuf_puts(c->b, ",source=\"os\"} 1\n");
		}
	}
	/* kepler-model-server's node_info feature: the node type is the value, the spec what it
	 * stands for; of the machine exportd runs on, as kepler_node_cpu_info */
	if (c->in->ncpus &&
	    render_family(c, "kepler_node_node_info", "gauge",
			  "Node type (kepler-model-server's node_info feature) and machine spec",
			  EX_NODE)) {
		char num[3][16];
		snprintf(num[0], sizeof num[0], "%u", s.cores);
		snprintf(num[1], sizeof num[1], "%u", s.chips);
		snprintf(num[2], sizeof num[2], "%u", s.threads_per_core);
		render_begin(c);
		rbuf_label(c->b, true, "vendor", s.vendor, sizeof s.vendor);
		rbuf_label(c->b, false, "processor", s.processor, sizeof s.processor);
		rbuf_label(c->b, false, "cores", num[0], sizeof num[0]);
		rbuf_label(c->b, false, "chips", num[1], sizeof num[1]);
		rbuf_label(c->b, false, "threads_per_core", num[2], sizeof num[2]);
		rbuf_puts(c->b, "} ");
		rbuf_printf(c->b, "%lld\n", (long long)c->in->node_type);
	}
}

/* ---- workloads ---- */

/*
 * The value of label name in a rendered label set (name="value",...), still escaped as it was
 * rendered: Kepler 0.9's workload labels are the 0.10 labels' values under other names, taken
 * from the one string accum.c renders per workload. NULL when absent.
 */
static const char *label_in(const char *labels, const char *name, size_t *len)
{
	size_t n = strlen(name);
	for (const char *p = labels; p && *p;) {
		const char *eq = strchr(p, '=');
		if (!eq || eq[1] != '"')
			return NULL;
		const char *v = eq + 2, *e = v;
		while (*e && *e != '"')
			e += e[0] == '\\' && e[1] ? 2 : 1;
		if ((size_t)(eq - p) == n && !strncmp(p, name, n)) {
			*len = (size_t)(e - v);
			return v;
		}
		p = *e ? e + 1 : e;
		if (*p == ',')
			p++;
	}
	return NULL;
}

/* ,name="value of from in labels", else the value dflt (no escapes). */
static void copy_label_or(struct render_ctx *c, const char *name, const char *labels,
			  const char *from, const char *dflt)
{
	size_t len = 0;
	const char *v = label_in(labels, from, &len);
	if (!v || !len) {
		v = dflt;
		len = strlen(dflt);
	}
	rbuf_putc(c->b, ',');
	rbuf_puts(c->b, name);
	rbuf_put(c->b, "=\"", 2);
	rbuf_put(c->b, v, len);
	rbuf_putc(c->b, '"');
}

/* ,name="value of from in labels" (empty when absent). */
static void copy_label(struct render_ctx *c, const char *name, const char *labels, const char *from)
{
	copy_label_or(c, name, labels, from, "");
}

/* A container's pod: its name and namespace as kepler_pod_* shows them, else the kubelet's, else
 * the uid (as there without names). Unknown ones are Kepler 0.9's defaults for a container the
 * kubelet does not list (cgroup.GetContainerInfo): pod_name "system_processes", namespace
 * "system". Never empty: Prometheus drops an empty label, and kepler-model-server takes only
 * container series with all of container_id, pod_name, container_name, container_namespace. */
static void container_pod(struct render_ctx *c, const struct ex_host *h, const struct ex_work *w)
{
	size_t len = 0;
	const char *uid = label_in(w->labels, "pod_id", &len);
	char id[128];
	snprintf(id, sizeof id, "%.*s", (int)(uid ? len : 0), uid ? uid : "");
	const struct ex_work *pod = id[0] ? accum_work(h, EX_POD, id) : NULL;
	if (pod && pod->labels) {
		copy_label_or(c, "pod_name", pod->labels, "pod_name", "system_processes");
		copy_label_or(c, "container_namespace", pod->labels, "pod_namespace", "system");
		return;
	}
	const struct kube_pod *kp = kube_names_pod(c->in->acc->kube, id);
	rbuf_label(c->b, false, "pod_name",
		   kp	   ? kp->name
		   : id[0] ? id
			   : "system_processes",
		   KUBE_NAME_MAX);
	rbuf_label(c->b, false, "container_namespace", kp && kp->ns[0] ? kp->ns : "system",
		   KUBE_NAME_MAX);
}

/* node_name and the level's 0.9 labels (ProcessEnergyLabels, ContainerEnergyLabels, ...). */
static void work_labels09(struct render_ctx *c, const struct ex_host *h, enum ex_level level,
			  const struct ex_work *w)
{
	rbuf_puts(c->b, h->node_label);
	switch (level) {
	case EX_PROCESS:
		copy_label(c, "pid", w->labels, "pid");
		copy_label(c, "container_id", w->labels, "container_id");
		copy_label(c, "vm_id", w->labels, "vm_id");
		copy_label(c, "command", w->labels, "comm");
		break;
	case EX_CONTAINER:
		copy_label(c, "container_id", w->labels, "container_id");
		container_pod(c, h, w);
		copy_label(c, "container_name", w->labels, "container_name");
		break;
	default:
		copy_label(c, "vm_id", w->labels, "vm_id");
		break;
	}
}

/*
 * The 0.9 labels of every workload of one level, rendered once per scrape (taking them out of
 * the 0.10 labels costs more than copying them): each family's series of a workload copies its
 * piece. Pieces are in the maps' order, which nothing changes during a scrape. Without memory
 * for it (off NULL) each series renders its labels itself.
 */
struct k9_prefix {
	struct rbuf b;
	size_t *off; /* n + 1 offsets into b: the i-th workload's labels are off[i]..off[i+1] */
	size_t n;
};

static void prefix_build(struct render_ctx *c, enum ex_level level, struct k9_prefix *p)
{
	*p = (struct k9_prefix){0};
	const struct accum *a = c->in->acc;
	size_t n = 0;
	for (size_t i = 0; i < a->nhosts; i++)
		n += a->hosts[i]->works[level].n;
	if (!(p->off = malloc((n + 1) * sizeof *p->off)))
		return;
	struct rbuf *out = c->b;
	c->b = &p->b;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		const struct ex_wmap *m = &h->works[level];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s && p->n < n;
		     s = wb_table_next(&m->tab, s)) {
			p->off[p->n++] = p->b.len;
			if (s->w->labels)
				work_labels09(c, h, level, s->w);
		}
	}
	p->off[p->n] = p->b.len;
	c->b = out;
	if (p->b.oom) {
		free(p->off);
		p->off = NULL;
	}
}

static void prefix_free(struct k9_prefix *p)
{
	rbuf_free(&p->b);
	free(p->off);
	*p = (struct k9_prefix){0};
}

/* name{ and the idx-th workload's labels. */
static void work_begin(struct render_ctx *c, const struct k9_prefix *p, size_t idx,
		       const struct ex_host *h, enum ex_level level, const struct ex_work *w)
{
	render_begin(c);
	if (p->off && idx < p->n)
		rbuf_put(c->b, p->b.p + p->off[idx], p->off[idx + 1] - p->off[idx]);
	else
		work_labels09(c, h, level, w);
}

/* What a workload's energy of each component is: its host's kinds and their component. */
struct k9_host {
	int comp[EX_MAX_ZONES];	  /* per kind */
	const char *source[K9_N]; /* of the component's first zone */
};

static void host_comps(const struct ex_host *h, struct k9_host *k)
{
	bool pm = has_platform(h);
	for (size_t i = 0; i < h->nkinds; i++)
		k->comp[i] = kind_comp(&h->kinds[i], pm);
	for (int i = 0; i < K9_N; i++)
		k->source[i] = i == K9_OTHER ? "" : "trained_power_model";
	bool seen[K9_N] = {0};
	for (size_t z = 0; z < h->nzones; z++) {
		int comp = h->zones[z].labels ? zone_comp(h, &h->zones[z], pm) : -1;
		if (comp >= 0 && !seen[comp]) {
			seen[comp] = true;
			k->source[comp] = zone_source(&h->zones[z]);
		}
	}
	/* the components node_family serves as 0 J: the package's meter, as Kepler 0.9's one
	 * components source names them all */
	for (int i = 0; i < K9_N; i++)
		if (!seen[i] && zero_comp(h, i))
			k->source[i] = k->source[K9_PACKAGE];
}

/* A workload's energy (uJ) in the components of mask. */
static uint64_t work_uj(const struct ex_host *h, const struct k9_host *k, const struct ex_work *w,
			unsigned mask)
{
	uint64_t v = 0;
	for (size_t z = 0; z < w->nz && z < h->nkinds; z++)
		if (k->comp[z] >= 0 && (mask & (1u << k->comp[z])))
			v += w->uj[z];
	return v;
}

static bool any_gpu09(const struct accum *a)
{
	for (size_t i = 0; i < a->nhosts; i++)
		for (size_t z = 0; z < a->hosts[i]->nzones; z++)
			if (a->hosts[i]->zones[z].gpu)
				return true;
	return false;
}

/*
 * kepler_<level>_<component>_joules_total for every component, as Kepler 0.9 has them: a
 * series per workload and component whether or not it has energy there (0 J), mode "dynamic"
 * only (wattbus gives workloads their active energy; Kepler 0.9 splits idle energy to them
 * only with --expose-estimated-idle-power). comp K9_N: kepler_<level>_joules_total, Kepler's
 * package + dram + other + gpu.
 */
static void work_family(struct render_ctx *c, const struct k9_prefix *p, enum ex_level level,
			int comp)
{
	const char *lv = ex_level_names[level];
	char name[64], help[96];
	if (comp == K9_N) {
		snprintf(name, sizeof name, "kepler_%s_joules_total", lv);
		snprintf(help, sizeof help, "Aggregated value in joules value (Kepler 0.9)");
	} else {
		snprintf(name, sizeof name, "kepler_%s_%s_joules_total", lv, k9_names[comp]);
		snprintf(help, sizeof help, "Aggregated value in %s value (Kepler 0.9)",
			 k9_names[comp]);
	}
	if (!render_family(c, name, "counter", help, level))
		return;
	unsigned mask = comp == K9_N
			    ? (1u << K9_PACKAGE | 1u << K9_DRAM | 1u << K9_OTHER | 1u << K9_GPU)
			    : 1u << comp;
	const struct accum *a = c->in->acc;
	size_t idx = 0;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		struct k9_host k;
		host_comps(h, &k);
		const struct ex_wmap *m = &h->works[level];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
		     s = wb_table_next(&m->tab, s), idx++) {
			const struct ex_work *w = s->w;
			if (!w->labels)
				continue;
			work_begin(c, p, idx, h, level, w);
			rbuf_puts(c->b, ",mode=\"dynamic\"");
			/* a source is one of zone_source's names: nothing to escape */
			if (comp != K9_N) {
				rbuf_puts(c->b, ",source=\"");
				rbuf_puts(c->b, k.source[comp]);
				rbuf_putc(c->b, '"');
			}
			render_end_fixed(c, work_uj(h, &k, w, mask), 6);
		}
	}
}

/*
 * kepler_<level>_<feature>_total of Kepler 0.9's eBPF software counters: bpf_cpu_time_ms (the
 * CPU time, in ms) and bpf_page_cache_hit, which wattbus does not count: served as 0, because
 * Kepler 0.9 exports both wherever its writeback tracepoint attaches and its BPFOnly trainers
 * require both (a feature that stays 0 gets no weight). docs/exportd.md says so.
 */
static void work_counter(struct render_ctx *c, const struct k9_prefix *p, enum ex_level level,
			 const char *feature)
{
	bool cpu = !strcmp(feature, "bpf_cpu_time_ms");
	char name[64], help[96];
	snprintf(name, sizeof name, "kepler_%s_%s_total", ex_level_names[level], feature);
	snprintf(help, sizeof help, "Aggregated value in %s value from bpf", feature);
	if (!render_family(c, name, "counter", help, level))
		return;
	const struct accum *a = c->in->acc;
	size_t idx = 0;
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		const struct ex_wmap *m = &h->works[level];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
		     s = wb_table_next(&m->tab, s), idx++) {
			if (!s->w->labels)
				continue;
			work_begin(c, p, idx, h, level, s->w);
			rbuf_puts(c->b, ",source=\"bpf\"");
			render_end_fixed(c, cpu ? s->w->cpu_ns : 0, 6); /* ns as ms */
		}
	}
}

static void build_info09(struct render_ctx *c)
{
	const struct render_input *in = c->in;
	if (!render_family(
		c, "kepler_exporter_build_info", "gauge",
		"A metric with a constant '1' value labeled by version, revision, branch, os and arch from which kepler_exporter was built.",
		EX_NLEVELS))
		return;
	render_begin(c);
	rbuf_label(c->b, true, "arch", in->arch ? in->arch : "", 64);
	rbuf_label(c->b, false, "branch", in->branch ? in->branch : "", 64);
	rbuf_puts(c->b, ",os=\"linux\"");
	rbuf_label(c->b, false, "revision", in->revision ? in->revision : "", 64);
	rbuf_label(c->b, false, "version", in->version ? in->version : "", 64);
	rbuf_put(c->b, "} 1\n", 4);
}

void render_kepler09(struct render_ctx *c)
{
	const struct accum *a = c->in->acc;
	if (a) {
		/* Served beside Kepler's own profile, kepler_*_gpu_joules_total is that profile's
		 * (Kepler HEAD's labels): one family with both label sets would count twice in
		 * sum(). */
		bool both = c->f->profiles & (1u << EX_PROF_KEPLER);
		bool gpu = any_gpu09(a) && !both;
		for (int comp = 0; comp < K9_N; comp++)
			if (comp != K9_OTHER && (comp != K9_GPU || gpu))
				node_family(c, comp);
		node_info(c);
		static const enum ex_level levels[] = {EX_PROCESS, EX_CONTAINER, EX_VM};
		for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
			if (!(c->f->levels & (1u << levels[l])))
				continue;
			struct k9_prefix p;
			prefix_build(c, levels[l], &p);
			for (int comp = 0; comp < K9_N; comp++)
				if (comp != K9_GPU || gpu)
					work_family(c, &p, levels[l], comp);
			if (levels[l] != EX_VM)
				work_family(c, &p, levels[l], K9_N);
			work_counter(c, &p, levels[l], "bpf_cpu_time_ms");
			work_counter(c, &p, levels[l], "bpf_page_cache_hit");
			prefix_free(&p);
		}
	}
	build_info09(c);
}
