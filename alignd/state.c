/*
 * alignd's state file: what the engine needs to continue where it stopped,
 * saved and resumed through lib/json.c (wb_json_save/wb_json_load). The only
 * file I/O of the engine; align.c stays pure.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "align_int.h"
#include "json.h"
#include "log.h"

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
	int rc = wb_json_save(root, path, sync, err, sizeof(err));
	json_decref(root);
	if (rc < 0)
		log_rl(&a->rl_state, WB_LOG_WARN, "state %s", err);
	return rc;
}

/* A host or zone name as the bus carries it: 1 to 63 bytes (jansson checked the UTF-8). */
static bool state_name_ok(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s && s[0] && strlen(s) <= 63;
}

/* Each of the NULL-terminated keys, where present, is a non-negative integer. */
static bool state_uints_ok(const json_t *obj, ...)
{
	va_list ap;
	va_start(ap, obj);
	bool ok = true;
	for (const char *k; ok && (k = va_arg(ap, const char *));) {
		const json_t *v = json_object_get(obj, k);
		ok = !v || (json_is_integer(v) && json_integer_value(v) >= 0);
	}
	va_end(ap);
	return ok;
}

/* Objects in an array member; an absent member is an empty array. */
static bool state_objects_ok(const json_t *obj, const char *key)
{
	const json_t *a = json_object_get(obj, key), *v;
	size_t i;
	if (!a)
		return true;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, v)
	{
		if (!json_is_object(v))
			return false;
	}
	return true;
}

/*
 * The whole file is checked before anything in it is used: a damaged or
 * planted file is refused as a whole and alignd starts clean, rather than
 * resuming half of it or a host with no name.
 */
static int state_check(const json_t *root, char *why, size_t len)
{
	size_t i, j;
	const json_t *o, *z;
	if (!json_is_object(root) || !state_uints_ok(root, "version", "saved_ns", NULL) ||
	    !json_is_array(json_object_get(root, "power")) ||
	    !json_is_array(json_object_get(root, "usage")) || !state_objects_ok(root, "power") ||
	    !state_objects_ok(root, "usage")) {
		snprintf(why, len,
			 "not an alignd state (an object with version, saved_ns, power and usage)");
		return -1;
	}
	json_array_foreach(json_object_get(root, "power"), i, o)
	{
		if (!state_name_ok(o, "host") || !state_objects_ok(o, "zones") ||
		    !state_uints_ok(o, "epoch", "interval_ns", "last_t", NULL)) {
			snprintf(
			    why, len,
			    "power[%zu]: needs a host of 1 to 63 bytes, zones and non-negative integers",
			    i);
			return -1;
		}
		json_array_foreach(json_object_get(o, "zones"), j, z)
		{
			if (state_name_ok(z, "name") &&
			    state_uints_ok(z, "index", "first_t", "t", "e", "raw", "epoch", "range",
					   NULL))
				continue;
			snprintf(
			    why, len,
			    "power[%zu].zones[%zu]: needs a name of 1 to 63 bytes and non-negative integers",
			    i, j);
			return -1;
		}
	}
	json_array_foreach(json_object_get(root, "usage"), i, o)
	{
		const json_t *cpu = json_object_get(o, "cpu");
		if (!state_name_ok(o, "host") ||
		    !json_is_string(json_object_get(o, "power_host")) ||
		    strlen(wb_json_str(o, "power_host")) > 63 || !state_objects_ok(o, "carries") ||
		    !state_objects_ok(o, "totals") || (cpu && !json_is_array(cpu)) ||
		    !state_uints_ok(o, "epoch", "last_t", "total_epoch", NULL)) {
			snprintf(
			    why, len,
			    "usage[%zu]: needs a host of 1 to 63 bytes, a power_host, carries, totals and non-negative integers",
			    i);
			return -1;
		}
		json_array_foreach(cpu, j, z)
		{
			if (json_is_integer(z) && json_integer_value(z) >= 0)
				continue;
			snprintf(why, len, "usage[%zu].cpu[%zu]: not a non-negative integer", i, j);
			return -1;
		}
		json_array_foreach(json_object_get(o, "carries"), j, z)
		{
			if (state_name_ok(z, "zone") && state_uints_ok(z, "emitted_uj", NULL))
				continue;
			snprintf(
			    why, len,
			    "usage[%zu].carries[%zu]: needs a zone of 1 to 63 bytes and a non-negative emitted_uj",
			    i, j);
			return -1;
		}
		json_array_foreach(json_object_get(o, "totals"), j, z)
		{
			if (state_name_ok(z, "zone") && state_uints_ok(z, "uj", NULL))
				continue;
			snprintf(
			    why, len,
			    "usage[%zu].totals[%zu]: needs a zone of 1 to 63 bytes and a non-negative uj",
			    i, j);
			return -1;
		}
	}
	return 0;
}

int align_load(struct align *a, const char *path, uint64_t now_ns, uint64_t max_age_ns)
{
	char err[512], why[256];
	json_t *root = wb_json_load(path, JSON_REJECT_DUPLICATES, err, sizeof(err));
	if (!root) {
		if (errno != ENOENT)
			log_warnx("state %s: ignored, starting clean", err);
		return -1;
	}
	if (state_check(root, why, sizeof(why)) < 0) {
		log_warnx("state %s: %s: ignored, starting clean", path, why);
		json_decref(root);
		return -1;
	}
	uint64_t saved = wb_json_u64(root, "saved_ns");
	if (wb_json_u64(root, "version") != 1 || saved > now_ns || now_ns - saved > max_age_ns) {
		log_info("state %s: %s, not used", path,
			 wb_json_u64(root, "version") != 1 ? "unknown version"
							   : "older than host_timeout");
		json_decref(root);
		return -1;
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
	json_decref(root);
	log_info("state %s: resumed %zu power hosts and %zu usage hosts saved %.1f s ago", path,
		 npower, nusage, (double)(now_ns - saved) / 1e9);
	return 0;
}
