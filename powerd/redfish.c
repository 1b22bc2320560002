/*
 * The redfish source: a BMC's chassis power over HTTPS (lib/httpc.h). The
 * Chassis collection is walked once; per chassis the power is read from
 * EnvironmentMetrics (PowerWatts.Reading) where it has one, else from Power
 * (each PowerControl[] entry's PowerConsumedWatts: one zone each). Every
 * redfish_interval the readings are fetched again; between fetches the last
 * reading is held and integrated on the sampling grid as hwmon power is.
 * Requests run on lib/httpc's thread: a slow or dead BMC never delays a sample,
 * it is counted (read_errors, parse_errors) and logged, and its zones are left
 * out once their reading is older than they may be held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "httpc.h"
#include "powerd.h"

#define RF_TARGETS_MAX 64
#define RF_URL_MAX 512

enum rf_kind { RF_POWER, RF_ENV };

/* A resource read every interval, and the zones its readings feed. */
struct rf_target {
	char path[RF_URL_MAX]; /* /redfish/v1/Chassis/1U/Power */
	enum rf_kind kind;
	char chassis[64];
	size_t zi[16];	     /* zone indexes in the set, per PowerControl entry (RF_POWER) */
	char member[16][32]; /* their MemberId */
	unsigned nz;
};

enum rf_phase {
	RF_IDLE,	/* waiting for the next poll (or discovery retry) */
	RF_COLLECTION,	/* GET /redfish/v1/Chassis */
	RF_CHASSIS,	/* GET each chassis */
	RF_ENV_PROBE,	/* GET a chassis' EnvironmentMetrics: has it PowerWatts? */
	RF_POWER_PROBE, /* GET a chassis' Power: its PowerControl entries */
	RF_POLL,	/* GET each target */
};

struct rf_state {
	struct wb_httpc_opts http;
	char base[RF_URL_MAX]; /* https://host[:port] */
	char user[256], password[256];
	char ca_file[PD_PATH_MAX];
	int epfd;
	struct wb_httpc_job *job;
	char job_url[RF_URL_MAX + 64];
	enum rf_phase phase;
	bool discovered;
	/* discovery: chassis still to look at, the one being looked at and its links */
	char (*chassis)[RF_URL_MAX];
	size_t nchassis, ci;
	char env_path[RF_URL_MAX], power_path[RF_URL_MAX], chassis_id[64];
	struct rf_target targets[RF_TARGETS_MAX];
	size_t ntargets, ti;
	uint64_t next_mono_ns; /* when the next poll (or discovery attempt) may start */
	uint64_t interval_ns, hold_ns;
	struct wb_ratelimit rl;
};

/* Its keys in [powerd]. */
struct rf_conf {
	char *redfish_url;	   /* https://BMC[:PORT] */
	char *redfish_credentials; /* file: USER:PASSWORD, mode 600 */
	char *redfish_ca_file;	   /* "": the system's CAs */
	bool redfish_insecure;
	uint64_t redfish_interval_ns, redfish_timeout_ns;
};

static struct rf_state *rf_of(struct pd_set *set)
{
	return *pd_set_state(set, &redfish_source);
}

static int rf_check(const struct pd_opts *opts, char *err, size_t errlen)
{
	const struct rf_conf *conf = pd_source_conf(opts, &redfish_source);
	const char *u = conf->redfish_url;
	if (!u || !*u) {
		snprintf(err, errlen,
			 "source redfish needs redfish_url (https://BMC) and redfish_credentials");
		return -1;
	}
	bool https = !strncmp(u, "https://", 8);
	if (!https && strncmp(u, "http://", 7)) {
		snprintf(err, errlen, "redfish_url %s: expected https://HOST[:PORT]", u);
		return -1;
	}
	if (!https && !conf->redfish_insecure) {
		snprintf(
		    err, errlen,
		    "redfish_url %s: plain http would send the BMC's password in clear; use https (or set redfish_insecure)",
		    u);
		return -1;
	}
	if (strlen(u) >= RF_URL_MAX - 64) {
		snprintf(err, errlen, "redfish_url %s: too long", u);
		return -1;
	}
	if (!conf->redfish_credentials || !*conf->redfish_credentials) {
		snprintf(
		    err, errlen,
		    "source redfish needs redfish_credentials (a file: USER:PASSWORD, mode 600)");
		return -1;
	}
	return 0;
}

static void rf_count(struct pd_set *set, struct rf_state *rf, bool parse, const char *fmt,
		     const char *a, const char *b)
{
	if (parse)
		set->counts.parse_errors++;
	else
		set->counts.read_errors++;
	log_rl(&rf->rl, WB_LOG_WARN, fmt, a, b);
}

static int rf_get(struct rf_state *rf, const char *path, char *err, size_t errlen)
{
	snprintf(rf->job_url, sizeof(rf->job_url), "%s%s", rf->base, path);
	rf->job = wb_httpc_start("GET", rf->job_url, NULL, 0, &rf->http, err, errlen);
	if (!rf->job)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN};
	if (epoll_ctl(rf->epfd, EPOLL_CTL_ADD, wb_httpc_job_fd(rf->job), &ev) < 0) {
		snprintf(err, errlen, "redfish: cannot watch the request: %s", strerror(errno));
		wb_httpc_job_cancel(&rf->job); /* nothing would collect it */
		return -1;
	}
	return 0;
}

/* An @odata.id link under key of obj, or NULL. */
static const char *odata_link(const json_t *obj, const char *key)
{
	const json_t *v = key ? json_object_get(obj, key) : obj;
	return json_string_value(json_object_get(v, "@odata.id"));
}

/* A path this source may ask for: absolute, under /redfish/, nothing odd. */
static bool path_ok(const char *p)
{
	if (!p || strncmp(p, "/redfish/", 9) || strlen(p) >= RF_URL_MAX - 1)
		return false;
	for (const char *c = p; *c; c++)
		if (*c <= ' ' || *c == '#' || *c == '?' || *c == '\\' || (unsigned char)*c >= 0x7f)
			return false;
	return !strstr(p, "..");
}

/* Watts as uW; false when not a plausible reading. */
static bool watts_uw(const json_t *v, uint64_t *uw)
{
	if (!json_is_number(v))
		return false;
	double w = json_number_value(v);
	if (!(w >= 0) || w > 1e7)
		return false;
	*uw = (uint64_t)(w * 1e6 + 0.5);
	return true;
}

static void rf_add_zone(struct pd_set *set, struct rf_state *rf, struct rf_target *t,
			const char *member, const char *label)
{
	struct pd_zone z;
	pd_held_zone_init(set, &z, &redfish_source, rf->hold_ns);
	int fit =
	    t->kind == RF_POWER
		? pd_fmt(z.path, sizeof(z.path), "%s%s#/PowerControl/%s", rf->base, t->path, member)
		: pd_fmt(z.path, sizeof(z.path), "%s%s#/PowerWatts", rf->base, t->path);
	if (fit < 0) {
		log_warnx("redfish: chassis %s: %s%s: URL longer than %zu characters; no zone",
			  t->chassis, rf->base, t->path, sizeof(z.path) - 1);
		return;
	}
	/* a discovery that failed half-way is done again from the start: its zones stay */
	int zi = -1;
	for (size_t i = 0; i < set->n && zi < 0; i++)
		if (set->zones[i].src == &redfish_source && !strcmp(set->zones[i].path, z.path))
			zi = (int)i;
	bool known = zi >= 0;
	if (!known) {
		zi = pd_set_add(set, &z);
		if (zi < 0)
			return;
	}
	t->zi[t->nz] = (size_t)zi;
	snprintf(t->member[t->nz], sizeof(t->member[0]), "%s", member);
	t->nz++;
	if (!known)
		log_info("redfish: chassis %s: %s (%s) -> zone %s", t->chassis, label,
			 set->zones[zi].path, set->zones[zi].name);
}

/* A PowerControl entry's reading, by MemberId, or by position when there is none. */
static const json_t *power_control(const json_t *pcs, const char *member, size_t pos)
{
	size_t i;
	const json_t *pc;
	json_array_foreach(pcs, i, pc)
	{
		const char *m = json_string_value(json_object_get(pc, "MemberId"));
		if (m ? !strcmp(m, member) : i == pos)
			return pc;
	}
	return NULL;
}

/* One target's answer: hold its readings. Returns -1 when it has none (err says why). */
static int rf_take(struct pd_set *set, struct rf_target *t, const json_t *doc, char *err,
		   size_t errlen)
{
	if (t->kind == RF_ENV) {
		uint64_t uw;
		if (!watts_uw(json_object_get(json_object_get(doc, "PowerWatts"), "Reading"),
			      &uw)) {
			snprintf(err, errlen, "no number in PowerWatts.Reading");
			return -1;
		}
		pd_zone_hold(&set->zones[t->zi[0]], uw);
		return 0;
	}
	const json_t *pcs = json_object_get(doc, "PowerControl");
	int got = 0;
	for (unsigned k = 0; k < t->nz; k++) {
		uint64_t uw;
		const json_t *pc = power_control(pcs, t->member[k], k);
		if (pc && watts_uw(json_object_get(pc, "PowerConsumedWatts"), &uw)) {
			pd_zone_hold(&set->zones[t->zi[k]], uw);
			got++;
		}
	}
	if (got < (int)t->nz) {
		snprintf(err, errlen,
			 "%u of %u PowerControl entries without a number in PowerConsumedWatts",
			 t->nz - (unsigned)got, t->nz);
		return -1;
	}
	return 0;
}

static void rf_next_chassis(struct pd_set *set, struct rf_state *rf);

static void rf_finish_discovery(struct pd_set *set, struct rf_state *rf)
{
	free(rf->chassis);
	rf->chassis = NULL;
	rf->nchassis = rf->ci = 0;
	rf->phase = RF_IDLE;
	if (rf->ntargets == 0) {
		set->counts.parse_errors++;
		log_rl(
		    &rf->rl, WB_LOG_WARN,
		    "redfish: %s: no chassis with EnvironmentMetrics PowerWatts or Power PowerControl PowerConsumedWatts; trying again in a while",
		    rf->base);
		return;
	}
	rf->discovered = true;
	rf->next_mono_ns = 0; /* the first poll right away */
}

/* Discovery's next step after a chassis was looked at. */
static void rf_next_chassis(struct pd_set *set, struct rf_state *rf)
{
	char err[RF_URL_MAX + 256];
	rf->ci++;
	while (rf->ci < rf->nchassis) {
		rf->phase = RF_CHASSIS;
		if (rf_get(rf, rf->chassis[rf->ci], err, sizeof(err)) == 0)
			return;
		log_rl(&rf->rl, WB_LOG_WARN, "redfish: %s", err);
		rf->ci++;
	}
	rf_finish_discovery(set, rf);
}

static void rf_start_target(struct pd_set *set, struct rf_state *rf, enum rf_kind kind,
			    const char *path)
{
	char err[RF_URL_MAX + 256];
	rf->phase = kind == RF_ENV ? RF_ENV_PROBE : RF_POWER_PROBE;
	if (rf_get(rf, path, err, sizeof(err)) < 0) {
		log_rl(&rf->rl, WB_LOG_WARN, "redfish: %s", err);
		rf_next_chassis(set, rf);
	}
}

static void rf_on_chassis(struct pd_set *set, struct rf_state *rf, const json_t *doc)
{
	const char *id = json_string_value(json_object_get(doc, "Id"));
	const char *p = strrchr(rf->chassis[rf->ci], '/');
	snprintf(rf->chassis_id, sizeof(rf->chassis_id), "%s", id ? id : p ? p + 1 : "?");
	const char *env = odata_link(doc, "EnvironmentMetrics");
	const char *pow = odata_link(doc, "Power");
	rf->env_path[0] = rf->power_path[0] = '\0';
	if (path_ok(env))
		snprintf(rf->env_path, sizeof(rf->env_path), "%s", env);
	if (path_ok(pow))
		snprintf(rf->power_path, sizeof(rf->power_path), "%s", pow);
	if (rf->env_path[0])
		rf_start_target(set, rf, RF_ENV, rf->env_path);
	else if (rf->power_path[0])
		rf_start_target(set, rf, RF_POWER, rf->power_path);
	else {
		log_info("redfish: chassis %s has neither EnvironmentMetrics nor Power; no zone",
			 rf->chassis_id);
		rf_next_chassis(set, rf);
	}
}

static struct rf_target *rf_new_target(struct rf_state *rf, enum rf_kind kind, const char *path)
{
	if (rf->ntargets >= RF_TARGETS_MAX)
		return NULL;
	struct rf_target *t = &rf->targets[rf->ntargets];
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	snprintf(t->path, sizeof(t->path), "%s", path);
	snprintf(t->chassis, sizeof(t->chassis), "%s", rf->chassis_id);
	return t;
}

static void rf_on_probe(struct pd_set *set, struct rf_state *rf, const json_t *doc)
{
	char err[128];
	if (rf->phase == RF_ENV_PROBE) {
		uint64_t uw;
		struct rf_target *t = rf_new_target(rf, RF_ENV, rf->env_path);
		if (t &&
		    watts_uw(json_object_get(json_object_get(doc, "PowerWatts"), "Reading"), &uw)) {
			rf_add_zone(set, rf, t, "", "EnvironmentMetrics PowerWatts");
			if (t->nz) {
				rf->ntargets++;
				rf_take(set, t, doc, err, sizeof(err));
			}
			rf_next_chassis(set, rf);
			return;
		}
		/* no reading there: the older Power resource may have one */
		if (rf->power_path[0]) {
			rf_start_target(set, rf, RF_POWER, rf->power_path);
			return;
		}
		rf_next_chassis(set, rf);
		return;
	}
	struct rf_target *t = rf_new_target(rf, RF_POWER, rf->power_path);
	const json_t *pcs = json_object_get(doc, "PowerControl");
	size_t i;
	const json_t *pc;
	json_array_foreach(pcs, i, pc)
	{
		uint64_t uw;
		if (!t || t->nz >= sizeof(t->zi) / sizeof(t->zi[0]) ||
		    !watts_uw(json_object_get(pc, "PowerConsumedWatts"), &uw))
			continue;
		char member[32], label[160];
		const char *m = json_string_value(json_object_get(pc, "MemberId"));
		const char *name = json_string_value(json_object_get(pc, "Name"));
		snprintf(member, sizeof(member), "%s", m ? m : "");
		if (!m)
			snprintf(member, sizeof(member), "%zu", i);
		bool bad = false;
		for (const char *c = member; *c; c++)
			bad |= *c <= ' ' || *c == '#' || (unsigned char)*c >= 0x7f;
		if (bad || !member[0])
			continue;
		snprintf(label, sizeof(label), "PowerControl %s \"%.100s\"", member,
			 name ? name : "");
		rf_add_zone(set, rf, t, member, label);
	}
	if (t && t->nz) {
		rf->ntargets++;
		rf_take(set, t, doc, err, sizeof(err));
	} else {
		log_info(
		    "redfish: chassis %s: %s has no PowerControl entry with PowerConsumedWatts; no zone",
		    rf->chassis_id, rf->power_path);
	}
	rf_next_chassis(set, rf);
}

static void rf_on_collection(struct pd_set *set, struct rf_state *rf, const json_t *doc)
{
	const json_t *members = json_object_get(doc, "Members");
	size_t n = json_array_size(members);
	rf->chassis = n ? calloc(n, sizeof(*rf->chassis)) : NULL;
	rf->nchassis = 0;
	size_t i;
	const json_t *m;
	json_array_foreach(members, i, m)
	{
		const char *p = odata_link(m, NULL);
		if (rf->chassis && path_ok(p))
			snprintf(rf->chassis[rf->nchassis++], RF_URL_MAX, "%s", p);
	}
	rf->ci = (size_t)-1;
	rf_next_chassis(set, rf);
}

static void rf_poll_next(struct pd_set *set, struct rf_state *rf)
{
	char err[RF_URL_MAX + 256];
	while (++rf->ti < rf->ntargets) {
		rf->phase = RF_POLL;
		if (rf_get(rf, rf->targets[rf->ti].path, err, sizeof(err)) == 0)
			return;
		rf_count(set, rf, false, "redfish: %s%s", err, "");
	}
	rf->phase = RF_IDLE;
}

/* Start whatever is due: discovery (again), or the next poll. */
static int rf_tend(struct pd_set *set)
{
	struct rf_state *rf = rf_of(set);
	if (!rf || rf->job || rf->phase != RF_IDLE)
		return 0;
	uint64_t now = wb_mono_ns();
	if (now < rf->next_mono_ns)
		return 0;
	rf->next_mono_ns = now + rf->interval_ns;
	char err[RF_URL_MAX + 256];
	if (!rf->discovered) {
		rf->ntargets = 0;
		rf->phase = RF_COLLECTION;
		if (rf_get(rf, "/redfish/v1/Chassis", err, sizeof(err)) < 0) {
			rf->phase = RF_IDLE;
			rf_count(set, rf, false, "redfish: %s%s", err, "");
		}
		return 0;
	}
	rf->ti = (size_t)-1;
	rf_poll_next(set, rf);
	return 0;
}

/* The request is done: take its answer and start the next step. */
static int rf_on_readable(struct pd_set *set)
{
	struct rf_state *rf = rf_of(set);
	struct epoll_event ev;
	while (epoll_wait(rf->epfd, &ev, 1, 0) > 0 && rf->job && wb_httpc_job_done(rf->job)) {
		epoll_ctl(rf->epfd, EPOLL_CTL_DEL, wb_httpc_job_fd(rf->job), NULL);
		struct wb_httpc_resp resp;
		char err[RF_URL_MAX + 512];
		enum wb_httpc_result res = wb_httpc_job_finish(rf->job, &resp, err, sizeof(err));
		rf->job = NULL;
		json_t *doc = NULL;
		if (res != WB_HTTPC_OK) {
			bool auth =
			    res == WB_HTTPC_STATUS && (resp.status == 401 || resp.status == 403);
			rf_count(set, rf, false, "redfish: %s%s", err,
				 auth ? " (check redfish_credentials)" : "");
		} else if (!(doc = wb_httpc_json(&resp, rf->job_url, err, sizeof(err)))) {
			rf_count(set, rf, true, "redfish: %s%s", err, "");
		}
		wb_httpc_resp_free(&resp);
		enum rf_phase phase = rf->phase;
		if (!doc) {
			/* this step failed: a poll goes on with the next target, discovery starts
			 * over at the next interval */
			if (phase == RF_POLL) {
				rf_poll_next(set, rf);
			} else if (phase == RF_ENV_PROBE || phase == RF_POWER_PROBE ||
				   phase == RF_CHASSIS) {
				rf->ntargets = 0;
				free(rf->chassis);
				rf->chassis = NULL;
				rf->nchassis = 0;
				rf->phase = RF_IDLE;
			} else {
				rf->phase = RF_IDLE;
			}
			continue;
		}
		switch (phase) {
		case RF_COLLECTION:
			rf_on_collection(set, rf, doc);
			break;
		case RF_CHASSIS:
			rf_on_chassis(set, rf, doc);
			break;
		case RF_ENV_PROBE:
		case RF_POWER_PROBE:
			rf_on_probe(set, rf, doc);
			break;
		case RF_POLL: {
			char why[128];
			struct rf_target *t = &rf->targets[rf->ti];
			if (rf_take(set, t, doc, why, sizeof(why)) < 0)
				rf_count(set, rf, true, "redfish: %s: %s", rf->job_url, why);
			rf_poll_next(set, rf);
			break;
		}
		case RF_IDLE:
			break;
		}
		json_decref(doc);
	}
	return 0;
}

static int rf_watch_fd(struct pd_set *set)
{
	struct rf_state *rf = rf_of(set);
	return rf ? rf->epfd : -1;
}

static void rf_destroy(struct pd_set *set)
{
	struct rf_state *rf = rf_of(set);
	if (!rf)
		return;
	wb_httpc_job_cancel(&rf->job); /* a hung BMC never holds the stop */
	if (rf->epfd >= 0)
		close(rf->epfd);
	free(rf->chassis);
	explicit_bzero(rf->password, sizeof(rf->password));
	free(rf);
	*pd_set_state(set, &redfish_source) = NULL;
}

static int rf_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	const struct rf_conf *conf = pd_source_conf(opts, &redfish_source);
	if (rf_check(opts, why, whylen) < 0 || wb_httpc_load(why, whylen) < 0)
		return 0;
	struct rf_state *rf = calloc(1, sizeof(*rf));
	if (!rf) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	rf->epfd = -1;
	if (pd_read_credentials("redfish_credentials", conf->redfish_credentials, rf->user,
				sizeof(rf->user), rf->password, sizeof(rf->password), why,
				whylen) < 0) {
		free(rf);
		return 0;
	}
	rf->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (rf->epfd < 0) {
		snprintf(why, whylen, "epoll_create1: %s", strerror(errno));
		free(rf);
		return 0;
	}
	snprintf(rf->base, sizeof(rf->base), "%s", conf->redfish_url);
	size_t bl = strlen(rf->base);
	while (bl > 0 && rf->base[bl - 1] == '/')
		rf->base[--bl] = '\0';
	/* the config is freed on reload: keep copies of what requests need */
	if (conf->redfish_ca_file &&
	    pd_fmt(rf->ca_file, sizeof(rf->ca_file), "%s", conf->redfish_ca_file) < 0) {
		snprintf(why, whylen, "redfish_ca_file: path too long");
		close(rf->epfd);
		free(rf);
		return 0;
	}
	rf->http = (struct wb_httpc_opts){
	    .ca_file = rf->ca_file[0] ? rf->ca_file : NULL,
	    .insecure = conf->redfish_insecure,
	    .user = rf->user,
	    .password = rf->password,
	    .accept = "application/json",
	    .timeout_ms = (long)(conf->redfish_timeout_ns / 1000000),
	    .max_body = 1 << 20,
	};
	rf->interval_ns = conf->redfish_interval_ns;
	/* A reading stands until two polls have failed after it (and the time one may take). */
	rf->hold_ns = 2 * conf->redfish_interval_ns + conf->redfish_timeout_ns;
	rf->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	if (conf->redfish_insecure)
		log_warnx(
		    "redfish: redfish_insecure is set: the BMC at %s is not verified (TLS certificate and host name), so anyone in the path can read its password and fake its readings",
		    rf->base);
	*pd_set_state(set, &redfish_source) = rf;
	set->used |= 1u << pd_source_index(&redfish_source);
	log_info("redfish: %s, every %.1f s; zones appear once the Chassis collection is read",
		 rf->base, (double)rf->interval_ns / 1e9);
	rf_tend(set);
	return 1;
}

#define OFF(f) offsetof(struct rf_conf, f)
static const struct wb_conf_key rf_keys[] = {
    {"redfish_url", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_url), "", 0, 0, NULL,
     "the BMC for the redfish source: https://HOST[:PORT] (its Chassis collection is read)"},
    {"redfish_credentials", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_credentials), "", 0, 0, NULL,
     "file holding the BMC's USER:PASSWORD; refused unless owned by powerd's user and mode 600 or stricter"},
    {"redfish_ca_file", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_ca_file), "", 0, 0, NULL,
     "PEM file of the CA(s) that signed the BMC's certificate; empty: the system's"},
    {"redfish_insecure", WB_CONF_BOOL | WB_CONF_RESTART, OFF(redfish_insecure), "false", 0, 0, NULL,
     "skip TLS verification of the BMC (logs a warning: its password and readings are then open to anyone in the path)"},
    {"redfish_interval", WB_CONF_DURATION | WB_CONF_RESTART, OFF(redfish_interval_ns), "10s", 1e9,
     3600e9, NULL,
     "how often the BMC is asked (1s..1h): no faster than it updates its readings (5-60 s on most BMCs)"},
    {"redfish_timeout", WB_CONF_DURATION | WB_CONF_RESTART, OFF(redfish_timeout_ns), "5s", 100e6,
     60e9, NULL, "longest wait for one answer of the BMC"},
};
#undef OFF

const struct pd_source redfish_source = {
    .name = "redfish",
    .in_auto = false,
    .keys = rf_keys,
    .nkeys = sizeof(rf_keys) / sizeof(rf_keys[0]),
    .conf_size = sizeof(struct rf_conf),
    .power_from = "from the BMC's watts, held between its updates",
    .discover = rf_discover,
    .check = rf_check,
    .read = pd_zone_read_held,
    .watch_fd = rf_watch_fd,
    .on_readable = rf_on_readable,
    .tend = rf_tend,
    .destroy = rf_destroy,
};
