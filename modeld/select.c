/*
 * Kepler's model-server selection rules as pure functions: machine specs and
 * their similarity, node types, feature groups, filters. Followed from
 * kepler-model-server (util/similarity.py, train/profiler/node_type_index.py,
 * util/train_types.py, util/loader.py); where wattbus differs, docs/modeld.md says so.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "modeld.h"
#include "spec.h"

void md_one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* ---- machine specs (lib/kmodel.h reads and writes them) ---- */
bool md_spec_complete(const struct km_spec *s)
{
	return s->processor[0] && s->cores > 0 && s->chips > 0 && s->memory_gib > 0 &&
	       s->frequency_mhz > 0;
}

bool md_spec_covers(const struct km_spec *node, const struct km_spec *spec)
{
	if (spec->processor[0] && strcmp(node->processor, spec->processor))
		return false;
	const uint64_t a[4] = {node->cores, node->chips, node->memory_gib, node->frequency_mhz};
	const uint64_t b[4] = {spec->cores, spec->chips, spec->memory_gib, spec->frequency_mhz};
	for (int i = 0; i < 4; i++)
		if (b[i] > 0 && a[i] != b[i])
			return false;
	return true;
}

static double jaccard(const char *a, const char *b)
{
	if (!strcasecmp(a, b))
		return 1;
	if (!*a || !*b)
		return 0;
	bool sa[256] = {0}, sb[256] = {0};
	for (; *a; a++)
		sa[tolower((unsigned char)*a)] = true;
	for (; *b; b++)
		sb[tolower((unsigned char)*b)] = true;
	unsigned in = 0, un = 0;
	for (int i = 0; i < 256; i++) {
		in += sa[i] && sb[i];
		un += sa[i] || sb[i];
	}
	return (double)in / un * 0.5;
}

static double closeness(double base, double cmp)
{
	double d = base > 0 || cmp > 0 ? fabs(cmp - base) / ((base + cmp) / 2) : 0;
	return d >= 1 ? 0 : 1 - d;
}

double md_spec_similarity(const struct km_spec *node, const struct km_spec *spec)
{
	double t = 0;
	if (spec->processor[0])
		t += jaccard(node->processor, spec->processor) * 5;
	if (spec->cores > 0)
		t += closeness(node->cores, spec->cores) * 1;
	if (spec->chips > 0)
		t += closeness(node->chips, spec->chips) * 1;
	if (spec->memory_gib > 0)
		t += closeness(node->memory_gib, spec->memory_gib) * 0.5;
	if (spec->frequency_mhz > 0)
		t += closeness(node->frequency_mhz, spec->frequency_mhz) * 0.5;
	t /= 8;
	return t > 1 ? 1 : t;
}

int md_node_type_of(const struct md_node_type *types, size_t n, const struct km_spec *spec,
		    double *similarity)
{
	*similarity = 0;
	if (!n || km_spec_empty(spec))
		return -1;
	bool complete = md_spec_complete(spec);
	int covered = -1;
	size_t covered_members = 0;
	int best = -1;
	size_t best_members = 0;
	double best_sim = -1;
	for (size_t i = 0; i < n; i++) {
		const struct md_node_type *t = &types[i];
		if (md_spec_covers(&t->spec, spec)) {
			if (complete) {
				*similarity = 1;
				return t->index;
			}
			if (covered < 0 || t->members > covered_members) {
				covered = t->index;
				covered_members = t->members;
			}
		}
		double sim = md_spec_similarity(&t->spec, spec);
		if (sim > best_sim || (sim == best_sim && t->members > best_members)) {
			best = t->index;
			best_sim = sim;
			best_members = t->members;
		}
	}
	if (covered >= 0) {
		*similarity = 1;
		return covered;
	}
	*similarity = best_sim;
	return best;
}

/* ---- feature groups ---- */
#define COUNTER "cache_miss", "cpu_cycles", "cpu_instructions"
#define BPF "bpf_cpu_time_ms", "bpf_page_cache_hit"
#define IRQ "bpf_block_irq", "bpf_net_rx_irq", "bpf_net_tx_irq"
#define ACCEL "accelerator_intel_qat"
static const char *const f_full[] = {
    COUNTER, BPF, IRQ, ACCEL, "node_info", "cpu_scaling_frequency_hertz", NULL};
static const char *const f_workload[] = {COUNTER, BPF, IRQ, ACCEL, NULL};
static const char *const f_counter[] = {COUNTER, NULL};
static const char *const f_bpf[] = {BPF, NULL};
static const char *const f_bpfirq[] = {BPF, IRQ, NULL};
static const char *const f_counterirq[] = {COUNTER, IRQ, NULL};
static const char *const f_basic[] = {COUNTER, BPF, NULL};
static const char *const f_accel[] = {ACCEL, NULL};

/* Kepler's FeatureGroups, in its order; ThirdParty: models whose features are no group's. */
const struct md_group md_groups[] = {
    {"Full", f_full},	{"WorkloadOnly", f_workload}, {"CounterOnly", f_counter},
    {"BPFOnly", f_bpf}, {"BPFIRQ", f_bpfirq},	      {"CounterIRQCombined", f_counterirq},
    {"Basic", f_basic}, {"AcceleratorOnly", f_accel}, {"ThirdParty", NULL},
};
const size_t md_ngroups = sizeof md_groups / sizeof md_groups[0];

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return true;
	return false;
}

const struct md_group *md_group_of(const char *const *features, size_t n)
{
	for (size_t g = 0; g < md_ngroups; g++) {
		const char *const *f = md_groups[g].features;
		if (!f)
			continue;
		size_t k = 0;
		for (; f[k]; k++)
			if (!in_list(f[k], features, n))
				break;
		if (!f[k] && k == n)
			return &md_groups[g];
	}
	return NULL;
}

const struct md_group *md_group_find(const char *name)
{
	for (size_t g = 0; g < md_ngroups; g++)
		if (!strcmp(md_groups[g].name, name))
			return &md_groups[g];
	return NULL;
}

bool md_group_valid(const struct md_group *g, char *const *metrics, size_t n)
{
	if (!g->features)
		return false;
	for (const char *const *f = g->features; *f; f++)
		if (!in_list(*f, (const char *const *)metrics, n))
			return false;
	return true;
}

/* ---- filters ---- */
int md_filter_parse(const char *text, struct md_filter *f, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	const char *p = text;
	while (*p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len) {
			char item[128];
			if (len >= sizeof item) {
				snprintf(err, errlen, "filter: item \"%.40s...\" is too long", p);
				return -1;
			}
			memcpy(item, p, len);
			item[len] = '\0';
			char *colon = strchr(item, ':');
			double v;
			if (!colon || colon == item || wb_parse_double(colon + 1, &v) < 0 ||
			    !isfinite(v)) {
				snprintf(err, errlen,
					 "filter: \"%s\" is not KEY:NUMBER (as in mae:10;mape:20)",
					 item);
				return -1;
			}
			if (f->n == MD_FILTER_MAX) {
				snprintf(err, errlen, "filter: more than %d conditions",
					 MD_FILTER_MAX);
				return -1;
			}
			*colon = '\0';
			if (strlen(item) >= sizeof f->c[0].key) {
				snprintf(err, errlen, "filter: key \"%.40s...\" is too long", item);
				return -1;
			}
			snprintf(f->c[f->n].key, sizeof f->c[0].key, "%s", item);
			f->c[f->n++].value = v;
		}
		p += len + (end ? 1 : 0);
	}
	return 0;
}

bool md_filter_pass(const struct md_filter *f, const json_t *metadata)
{
	for (size_t i = 0; i < f->n; i++) {
		const json_t *v = json_object_get(metadata, f->c[i].key);
		if (!json_is_number(v))
			return false;
		double x = json_number_value(v);
		bool ok =
		    !strcmp(f->c[i].key, "abs_max_corr") ? x >= f->c[i].value : x <= f->c[i].value;
		if (!ok)
			return false;
	}
	return true;
}

bool md_trainer_weight_capable(const char *trainer)
{
	static const char *const w[] = {"SGDRegressorTrainer", "LogarithmicRegressionTrainer",
					"LogisticRegressionTrainer",
					"ExponentialRegressionTrainer"};
	for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
		if (!strcmp(trainer, w[i]))
			return true;
	return false;
}
