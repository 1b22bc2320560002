/*
 * alignd's state file: what the engine needs to continue where it stopped,
 * saved and resumed through lib/state.c (wb_state_save_json/wb_state_load_json,
 * checked against the shape table below). The only file I/O of the engine;
 * align.c stays pure.
 */
#include <inttypes.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "align_int.h"
#include "json.h"
#include "log.h"
#include "state.h"

/*
 * What alignd needs to continue where it stopped: per power zone its last
 * sample (so the next one adds on, or bridges a powerd restart), per usage
 * host the boundary after its last published slot, node CPU totals there,
 * carries and totals. Slots still waiting for power are not in it: the first
 * slot after a restart starts where the published ones ended. Saved at a
 * clean stop and, as a checkpoint, every state_every while running, so that
 * after a crash (SIGKILL) a restart continues from the last checkpoint: slots
 * published after it are published again, and consumers drop them by time
 * and by total_uj.
 */
int align_save(struct align *a, const char *path, uint64_t now_ns, bool sync)
{
	json_t *power = json_array(), *usage = json_array();
	json_t *root = json_pack("{s:i, s:I, s:o, s:o}", "version", 1, "saved_ns",
				 (json_int_t)now_ns, "power", power, "usage", usage);
	if (!root)
		return -1;
	for (struct phost *ph = zhashx_first(a->phosts); ph; ph = zhashx_next(a->phosts)) {
		if (!ph->have_t)
			continue;
		json_t *zones = json_array();
		for (size_t i = 0; i < ph->ncurves; i++) {
			const struct curve *c = ph->curves[i];
			if (!c->n)
				continue;
			const struct curve_sample *last = &c->s[c->n - 1];
			json_array_append_new(
			    zones,
			    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name",
				      c->name, "zone", c->zone, "path", c->path, "index",
				      (json_int_t)c->index, "first_t", (json_int_t)c->first_t_ns,
				      "t", (json_int_t)last->t_ns, "e", (json_int_t)last->e_uj,
				      "raw", (json_int_t)c->raw_last_uj, "epoch",
				      (json_int_t)c->epoch, "range", (json_int_t)c->range_uj));
		}
		json_array_append_new(power,
				      json_pack("{s:s, s:I, s:I, s:I, s:o}", "host", ph->name,
						"epoch", (json_int_t)ph->epoch, "interval_ns",
						(json_int_t)ph->interval_ns, "last_t",
						(json_int_t)ph->last_t, "zones", zones));
	}
	for (struct uhost *uh = zhashx_first(a->uhosts); uh; uh = zhashx_next(a->uhosts)) {
		if (!uh->have_t)
			continue;
		json_t *carries = json_array(), *totals = json_array();
		for (size_t i = 0; i < uh->ncarries; i++)
			if (uh->carries[i].curve_id)
				json_array_append_new(
				    carries,
				    json_pack("{s:s, s:I, s:b}", "zone", uh->carries[i].name,
					      "emitted_uj", (json_int_t)uh->carries[i].emitted_uj,
					      "ahead", uh->carries[i].ahead));
		for (size_t i = 0; i < uh->ntotals; i++)
			json_array_append_new(totals,
					      json_pack("{s:s, s:I}", "zone", uh->totals[i].name,
							"uj", (json_int_t)uh->totals[i].uj));
		struct wb_cpu_times cb = cpu_at_boundary(uh);
		const struct wb_cpu_times *c = &cb;
		uint64_t boundary = uh->qlen ? uh->q[uh->qhead].msg.aligned.t0 : uh->last_t;
		json_array_append_new(
		    usage, json_pack("{s:s, s:s, s:I, s:I, s:[I,I,I,I,I,I,I,I], s:o, s:I, s:o}",
				     "host", uh->name, "power_host", uh->power_name, "epoch",
				     (json_int_t)uh->epoch, "last_t", (json_int_t)boundary, "cpu",
				     (json_int_t)c->user_ns, (json_int_t)c->nice_ns,
				     (json_int_t)c->system_ns, (json_int_t)c->idle_ns,
				     (json_int_t)c->iowait_ns, (json_int_t)c->irq_ns,
				     (json_int_t)c->softirq_ns, (json_int_t)c->steal_ns, "carries",
				     carries, "total_epoch", (json_int_t)uh->total_epoch, "totals",
				     totals));
	}
	char err[512];
	int rc = wb_state_save_json(root, path, sync, err, sizeof(err));
	if (rc < 0)
		log_rl(&a->rl_state, WB_LOG_WARN, "state %s", err);
	return rc;
}

static const struct wb_state_field zone_fields[] = {
    {"name", true, WB_SK_NAME},	 {"index", false, WB_SK_U64}, {"first_t", false, WB_SK_U64},
    {"t", false, WB_SK_U64},	 {"e", false, WB_SK_U64},     {"raw", false, WB_SK_U64},
    {"epoch", false, WB_SK_U64}, {"range", false, WB_SK_U64}, {NULL},
};
static const struct wb_state_field power_fields[] = {
    {"host", true, WB_SK_NAME},	  {"zones", false, WB_SK_OBJECTS(zone_fields)},
    {"epoch", false, WB_SK_U64},  {"interval_ns", false, WB_SK_U64},
    {"last_t", false, WB_SK_U64}, {NULL},
};
static const struct wb_state_field carry_fields[] = {
    {"zone", true, WB_SK_NAME}, {"emitted_uj", false, WB_SK_U64}, {NULL}};
static const struct wb_state_field total_fields[] = {
    {"zone", true, WB_SK_NAME}, {"uj", false, WB_SK_U64}, {NULL}};
static const struct wb_state_field usage_fields[] = {
    {"host", true, WB_SK_NAME},
    {"power_host", true, {.kind = WB_SK_STRING, .max_len = 63}},
    {"carries", false, WB_SK_OBJECTS(carry_fields)},
    {"totals", false, WB_SK_OBJECTS(total_fields)},
    {"cpu", false, WB_SK_ARRAY_OF(WB_SK_U64)},
    {"epoch", false, WB_SK_U64},
    {"last_t", false, WB_SK_U64},
    {"total_epoch", false, WB_SK_U64},
    {NULL},
};
/* The whole file is checked before anything in it is used (lib/state.h). */
static const struct wb_state_field root_fields[] = {
    {"version", false, WB_SK_U64},
    {"saved_ns", false, WB_SK_U64},
    {"power", true, WB_SK_OBJECTS(power_fields)},
    {"usage", true, WB_SK_OBJECTS(usage_fields)},
    {NULL},
};
static const struct wb_state_shape state_shape = WB_SK_OBJECT_OF(root_fields);

struct resume {
	struct align *a;
	const char *path;
	uint64_t now_ns, max_age_ns;
	bool used;
};

static int resume_state(const json_t *root, void *arg, char *why, size_t len)
{
	(void)why;
	(void)len;
	struct resume *r = arg;
	struct align *a = r->a;
	const char *path = r->path;
	uint64_t now_ns = r->now_ns, max_age_ns = r->max_age_ns;
	uint64_t saved = wb_json_u64(root, "saved_ns");
	if (wb_json_u64(root, "version") != 1 || saved > now_ns || now_ns - saved > max_age_ns) {
		log_info("state %s: %s, not used", path,
			 wb_json_u64(root, "version") != 1 ? "unknown version"
							   : "older than host_timeout");
		return 0;
	}
	size_t i, j, npower = 0, nusage = 0;
	json_t *o, *z;
	json_array_foreach(json_object_get(root, "power"), i, o)
	{
		struct phost *ph = phost_get(a, wb_json_str(o, "host"));
		if (!ph || ph->have_t)
			continue;
		ph->epoch = wb_json_u64(o, "epoch");
		ph->interval_ns = wb_json_u64(o, "interval_ns");
		ph->last_t = wb_json_u64(o, "last_t");
		ph->last_recv_ns = now_ns;
		ph->have_t = true;
		json_array_foreach(json_object_get(o, "zones"), j, z)
		{
			struct curve *c = curve_of(a, ph, wb_json_str(z, "name"), now_ns);
			if (!c || c->n)
				continue;
			snprintf(c->zone, sizeof(c->zone), "%s", wb_json_str(z, "zone"));
			snprintf(c->path, sizeof(c->path), "%s", wb_json_str(z, "path"));
			c->index = wb_json_u64(z, "index");
			/* One sample, as if just received: the next real one continues from it. */
			if (curve_add(c, wb_json_u64(z, "t"), wb_json_u64(z, "epoch"),
				      wb_json_u64(z, "raw"), wb_json_u64(z, "range"), 0,
				      NULL) != CURVE_APPENDED) {
				/* Empty, the curve starts over from the zone's next sample. */
				log_rl(&a->rl_state, WB_LOG_WARN,
				       "state %s: power/%s zone %s: out of memory: not resumed",
				       path, ph->name, c->name);
				continue;
			}
			c->s[0].e_uj = wb_json_u64(z, "e");
			c->first_t_ns = wb_json_u64(z, "first_t");
			c->last_recv_ns = now_ns;
		}
		npower++;
	}
	json_array_foreach(json_object_get(root, "usage"), i, o)
	{
		struct uhost *uh = uhost_get(a, wb_json_str(o, "host"));
		if (!uh || uh->have_t)
			continue;
		uh->epoch = wb_json_u64(o, "epoch");
		uh->last_t = wb_json_u64(o, "last_t");
		uh->have_t = true;
		/* The totals continue, so that consumers diff across the restart. */
		uh->total_epoch = wb_json_u64(o, "total_epoch");
		if (uh->total_epoch > a->last_total_epoch)
			a->last_total_epoch = uh->total_epoch;
		json_array_foreach(json_object_get(o, "totals"), j, z)
		{
			struct zone_total *zt = wb_json_str(z, "zone")[0]
						    ? total_get(uh, wb_json_str(z, "zone"))
						    : NULL;
			if (zt)
				zt->uj = wb_json_u64(z, "uj");
		}
		uh->live = false; /* no process table: it restarts at the next message */
		uh->last_recv_ns = now_ns;
		json_t *cpu = json_object_get(o, "cpu");
		uint64_t *ct = (uint64_t *)&uh->us.cpu;
		for (j = 0; j < sizeof(uh->us.cpu) / sizeof(uint64_t); j++)
			ct[j] = json_is_integer(json_array_get(cpu, j))
				    ? (uint64_t)json_integer_value(json_array_get(cpu, j))
				    : 0;
		/* Carries continue only on the same power host's curves. */
		struct phost *ph = zhashx_lookup(a->phosts, uh->power_name);
		if (ph && strcmp(wb_json_str(o, "power_host"), uh->power_name) == 0)
			json_array_foreach(json_object_get(o, "carries"), j, z)
			{
				for (size_t k = 0; k < ph->ncurves; k++) {
					/* A zone not resumed (no memory) has no value to carry on
					 * from. */
					if (strcmp(ph->curves[k]->name, wb_json_str(z, "zone")) !=
						0 ||
					    !ph->curves[k]->n)
						continue;
					struct carry *cy = carry_of(uh, ph->curves[k]->name);
					if (cy)
						carry_set(
						    cy, ph->curves[k]->id,
						    wb_json_u64(z, "emitted_uj"),
						    json_is_true(json_object_get(z, "ahead")));
				}
			}
		nusage++;
	}
	log_info("state %s: resumed %zu power hosts and %zu usage hosts saved %.1f s ago", path,
		 npower, nusage, (double)(now_ns - saved) / 1e9);
	r->used = true;
	return 0;
}

int align_load(struct align *a, const char *path, uint64_t now_ns, uint64_t max_age_ns)
{
	char err[512];
	struct resume r = {a, path, now_ns, max_age_ns, false};
	if (wb_state_load_json(path, &state_shape, resume_state, &r, err, sizeof(err)) < 0) {
		if (errno != ENOENT)
			log_warnx("state %s: ignored, starting clean", err);
		return -1;
	}
	return r.used ? 0 : -1;
}
