/*
 * The ipmi source: the DCMI power reading (Get Power Reading, system power
 * statistics) of the BMC through libfreeipmi, in-band (/dev/ipmi0, KCS) or over
 * the LAN (IPMI 2.0 lanplus, or 1.5). One zone of kind platform. A BMC answers
 * in milliseconds to seconds, and not at all when it is busy: every request runs
 * as a job (lib/job.h) that signals an eventfd, so the sampling loop never
 * waits, and a stopping powerd leaves a request libfreeipmi still holds behind
 * after the stop's bound; the reading is held between requests and integrated on
 * the grid as redfish's is. Failures are counted (read_errors, parse_errors) and logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <freeipmi/freeipmi.h>

#include "clock.h"
#include "dl.h"
#include "job.h"
#include "powerd.h"

/*
 * libfreeipmi, loaded when the source is configured (dl.h): a powerd without ipmi maps neither
 * it nor its libraries. The build passes its soname.
 */
_Static_assert(sizeof(WB_LIBFREEIPMI) > 1, "the Makefile found no soname for libfreeipmi");
static struct {
	__typeof__(ipmi_ctx_create) *ctx_create;
	__typeof__(ipmi_ctx_destroy) *ctx_destroy;
	__typeof__(ipmi_ctx_close) *ctx_close;
	__typeof__(ipmi_ctx_errormsg) *ctx_errormsg;
	__typeof__(ipmi_ctx_find_inband) *ctx_find_inband;
	__typeof__(ipmi_ctx_open_outofband) *ctx_open_outofband;
	__typeof__(ipmi_ctx_open_outofband_2_0) *ctx_open_outofband_2_0;
	__typeof__(ipmi_cmd_dcmi_get_power_reading) *cmd_dcmi_get_power_reading;
	__typeof__(fiid_obj_create) *obj_create;
	__typeof__(fiid_obj_get) *obj_get;
	__typeof__(fiid_obj_errormsg) *obj_errormsg;
	__typeof__(fiid_obj_destroy) *obj_destroy;
	__typeof__(tmpl_cmd_dcmi_get_power_reading_rs) *tmpl_power_reading_rs;
} fi;
static void *fi_lib;

static int ipmi_load(char *why, size_t whylen)
{
	const struct wb_dl_sym syms[] = {
	    {&fi.ctx_create, "ipmi_ctx_create", true},
	    {&fi.ctx_destroy, "ipmi_ctx_destroy", true},
	    {&fi.ctx_close, "ipmi_ctx_close", true},
	    {&fi.ctx_errormsg, "ipmi_ctx_errormsg", true},
	    {&fi.ctx_find_inband, "ipmi_ctx_find_inband", true},
	    {&fi.ctx_open_outofband, "ipmi_ctx_open_outofband", true},
	    {&fi.ctx_open_outofband_2_0, "ipmi_ctx_open_outofband_2_0", true},
	    {&fi.cmd_dcmi_get_power_reading, "ipmi_cmd_dcmi_get_power_reading", true},
	    {&fi.obj_create, "fiid_obj_create", true},
	    {&fi.obj_get, "fiid_obj_get", true},
	    {&fi.obj_errormsg, "fiid_obj_errormsg", true},
	    {&fi.obj_destroy, "fiid_obj_destroy", true},
	    {&fi.tmpl_power_reading_rs, "tmpl_cmd_dcmi_get_power_reading_rs", true},
	};
	if (fi_lib)
		return 0;
	char e[400];
	fi_lib = wb_dl_open(WB_LIBFREEIPMI, syms, sizeof(syms) / sizeof(syms[0]), e, sizeof(e));
	if (!fi_lib) {
		snprintf(why, whylen, "%s; install libfreeipmi (Debian: libfreeipmi17)", e);
		return -1;
	}
	return 0;
}

/* Its keys in [powerd]. */
struct ipmi_conf {
	char *ipmi_host;	/* "": in-band */
	char *ipmi_credentials; /* file: USER:PASSWORD, mode 600 (LAN only) */
	char *ipmi_protocol;	/* lanplus (IPMI 2.0) or lan (1.5) */
	uint64_t ipmi_interval_ns, ipmi_timeout_ns;
};

/* What one request works on; the job owns it. The BMC's session travels with it and comes back. */
struct ipmi_req {
	char host[256]; /* "": in-band */
	char user[64], password[64];
	bool lanplus;
	unsigned timeout_ms;
	ipmi_ctx_t ctx;
	bool open;
	int efd; /* a dup of the source's eventfd, written when done */
	/* the result */
	enum pd_read_err res;
	uint64_t uw;
	char err[512];
};

struct ipmi_state {
	char host[256]; /* "": in-band */
	char user[64], password[64];
	bool lanplus;
	unsigned timeout_ms;
	uint64_t interval_ns, next_mono_ns;
	int efd;
	struct wb_job *job; /* the request in flight, or NULL */
	ipmi_ctx_t ctx;	    /* the session, between requests */
	bool open;
	size_t zi;
	struct wb_ratelimit rl;
};

static struct ipmi_state *ipmi_of(struct pd_set *set)
{
	return *pd_set_state(set, &ipmi_source);
}

static const char *where(const char *host)
{
	return host[0] ? host : "the local BMC (in-band)";
}

static void session_close(ipmi_ctx_t ctx)
{
	if (ctx) {
		fi.ctx_close(ctx);
		fi.ctx_destroy(ctx);
	}
}

static void req_free(void *arg)
{
	struct ipmi_req *r = arg;
	session_close(r->ctx);
	if (r->efd >= 0)
		close(r->efd);
	explicit_bzero(r->password, sizeof(r->password));
	free(r);
}

static int ipmi_connect(struct ipmi_req *st)
{
	if (!st->ctx && !(st->ctx = fi.ctx_create())) {
		snprintf(st->err, sizeof(st->err), "ipmi: cannot create a context: %s",
			 strerror(errno));
		return -1;
	}
	int rc;
	if (!st->host[0]) {
		ipmi_driver_type_t driver;
		rc = fi.ctx_find_inband(st->ctx, &driver, 0, 0, 0, NULL, 0, 0);
		if (rc == 0) {
			snprintf(
			    st->err, sizeof(st->err),
			    "ipmi: no in-band IPMI interface found (no /dev/ipmi0: load ipmi_si and ipmi_devintf; run powerd as root)");
			return -1;
		}
	} else if (st->lanplus) {
		rc = fi.ctx_open_outofband_2_0(st->ctx, st->host, st->user, st->password, NULL, 0,
					       IPMI_PRIVILEGE_LEVEL_USER, 3, st->timeout_ms,
					       st->timeout_ms / 4, 0, 0);
	} else {
		rc = fi.ctx_open_outofband(st->ctx, st->host, st->user, st->password,
					   IPMI_AUTHENTICATION_TYPE_MD5, IPMI_PRIVILEGE_LEVEL_USER,
					   st->timeout_ms, st->timeout_ms / 4, 0, 0);
	}
	if (rc < 0) {
		snprintf(st->err, sizeof(st->err), "ipmi: %s: cannot open a session: %s",
			 where(st->host), fi.ctx_errormsg(st->ctx));
		return -1;
	}
	st->open = true;
	return 0;
}

/* One DCMI power reading (the job; libfreeipmi's calls cannot be interrupted: its own timeouts
 * bound them, and a stopping powerd does not wait past its bound). */
static void ipmi_work(struct wb_job *job, void *arg)
{
	struct ipmi_req *st = arg;
	st->res = PD_READ_IO;
	st->err[0] = '\0';
	fiid_obj_t rs = NULL;
	if (!st->open && ipmi_connect(st) < 0)
		goto done;
	if (!(rs = fi.obj_create(*fi.tmpl_power_reading_rs))) {
		snprintf(st->err, sizeof(st->err), "ipmi: out of memory");
		goto done;
	}
	if (fi.cmd_dcmi_get_power_reading(
		st->ctx, IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS, 0, rs) < 0) {
		snprintf(st->err, sizeof(st->err), "ipmi: %s: DCMI Get Power Reading: %s",
			 where(st->host), fi.ctx_errormsg(st->ctx));
		/* a session the BMC dropped is opened again next time */
		fi.ctx_close(st->ctx);
		st->open = false;
		goto done;
	}
	uint64_t watts, active;
	if (fi.obj_get(rs, "current_power", &watts) != 1 ||
	    fi.obj_get(rs, "power_reading_state.power_measurement", &active) != 1) {
		st->res = PD_READ_PARSE;
		snprintf(st->err, sizeof(st->err),
			 "ipmi: %s: DCMI Get Power Reading: answer without current_power: %s",
			 where(st->host), fi.obj_errormsg(rs));
		goto done;
	}
	if (!active) {
		st->res = PD_READ_PARSE;
		snprintf(
		    st->err, sizeof(st->err),
		    "ipmi: %s: DCMI power measurement is not active on the BMC (current_power %llu W not used)",
		    where(st->host), (unsigned long long)watts);
		goto done;
	}
	st->uw = watts * 1000000ull;
	st->res = PD_READ_OK;
done:
	if (rs)
		fi.obj_destroy(rs);
	uint64_t one = 1;
	if (write(st->efd, &one, sizeof(one)) < 0) {
		/* the eventfd cannot overflow at one write per request */
	}
}

static int ipmi_tend(struct pd_set *set)
{
	struct ipmi_state *st = ipmi_of(set);
	if (!st || st->job)
		return 0;
	uint64_t now = wb_mono_ns();
	if (now < st->next_mono_ns)
		return 0;
	st->next_mono_ns = now + st->interval_ns;
	struct ipmi_req *r = calloc(1, sizeof(*r));
	if (!r || (r->efd = fcntl(st->efd, F_DUPFD_CLOEXEC, 0)) < 0) {
		free(r);
		set->counts.read_errors++;
		log_rl(&st->rl, WB_LOG_WARN, "ipmi: cannot start a request: %s", strerror(errno));
		return 0;
	}
	memcpy(r->host, st->host, sizeof(r->host));
	memcpy(r->user, st->user, sizeof(r->user));
	memcpy(r->password, st->password, sizeof(r->password));
	r->lanplus = st->lanplus;
	r->timeout_ms = st->timeout_ms;
	r->ctx = st->ctx; /* the session goes with the request */
	r->open = st->open;
	st->ctx = NULL;
	st->open = false;
	char what[300], err[512];
	snprintf(what, sizeof(what), "DCMI power reading of %s", where(st->host));
	st->job = wb_job_start(what, 0, ipmi_work, r, req_free, err, sizeof(err));
	if (!st->job) {
		set->counts.read_errors++;
		log_rl(&st->rl, WB_LOG_WARN, "ipmi: cannot start a request: %s", err);
	}
	return 0;
}

static int ipmi_on_readable(struct pd_set *set)
{
	struct ipmi_state *st = ipmi_of(set);
	uint64_t n;
	if (read(st->efd, &n, sizeof(n)) != sizeof(n) || !st->job)
		return 0;
	/* The eventfd is written once the result is whole (the job may not have returned yet:
	 * releasing it then leaves only its memory to the thread, without the session). */
	struct ipmi_req *r = wb_job_arg(st->job);
	st->ctx = r->ctx; /* the session comes back */
	st->open = r->open;
	r->ctx = NULL;
	enum pd_read_err res = r->res;
	uint64_t uw = r->uw;
	char err[sizeof(r->err)];
	memcpy(err, r->err, sizeof(err));
	wb_job_release(&st->job);
	if (res == PD_READ_OK) {
		pd_zone_hold(&set->zones[st->zi], uw);
		return 0;
	}
	if (res == PD_READ_PARSE)
		set->counts.parse_errors++;
	else
		set->counts.read_errors++;
	log_rl(&st->rl, WB_LOG_WARN, "%s", err);
	return 0;
}

static int ipmi_watch_fd(struct pd_set *set)
{
	struct ipmi_state *st = ipmi_of(set);
	return st ? st->efd : -1;
}

static int ipmi_check(const struct pd_opts *opts, char *err, size_t errlen)
{
	const struct ipmi_conf *conf = pd_source_conf(opts, &ipmi_source);
	if (conf->ipmi_host && *conf->ipmi_host &&
	    (!conf->ipmi_credentials || !*conf->ipmi_credentials)) {
		snprintf(err, errlen,
			 "ipmi_host %s needs ipmi_credentials (a file: USER:PASSWORD, mode 600)",
			 conf->ipmi_host);
		return -1;
	}
	return 0;
}

static void ipmi_destroy(struct pd_set *set)
{
	struct ipmi_state *st = ipmi_of(set);
	if (!st)
		return;
	/* A request libfreeipmi still holds (an in-band driver can hold one longer than
	 * ipmi_timeout) is left behind with its session: the job frees both at its end. */
	wb_job_release(&st->job);
	session_close(st->ctx);
	if (st->efd >= 0)
		close(st->efd);
	explicit_bzero(st->password, sizeof(st->password));
	free(st);
	*pd_set_state(set, &ipmi_source) = NULL;
}

static int ipmi_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	const struct ipmi_conf *conf = pd_source_conf(opts, &ipmi_source);
	if (ipmi_check(opts, why, whylen) < 0 || ipmi_load(why, whylen) < 0)
		return 0;
	struct ipmi_state *st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	st->efd = -1;
	if (conf->ipmi_host && *conf->ipmi_host) {
		if (strlen(conf->ipmi_host) >= sizeof(st->host) - 1 ||
		    strpbrk(conf->ipmi_host, "/# \t")) {
			snprintf(why, whylen, "ipmi_host %s: expected a host name or address",
				 conf->ipmi_host);
			free(st);
			return 0;
		}
		snprintf(st->host, sizeof(st->host), "%s", conf->ipmi_host);
		if (pd_read_credentials("ipmi_credentials", conf->ipmi_credentials, st->user,
					sizeof(st->user), st->password, sizeof(st->password), why,
					whylen) < 0) {
			free(st);
			return 0;
		}
	}
	st->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (st->efd < 0) {
		snprintf(why, whylen, "eventfd: %s", strerror(errno));
		free(st);
		return 0;
	}
	st->lanplus = !strcmp(conf->ipmi_protocol, "lanplus");
	st->timeout_ms = (unsigned)(conf->ipmi_timeout_ns / 1000000);
	st->interval_ns = conf->ipmi_interval_ns;
	st->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;

	struct pd_zone z;
	/* A reading stands until two requests have failed after it. */
	pd_held_zone_init(set, &z, &ipmi_source, 2 * st->interval_ns + conf->ipmi_timeout_ns);
	snprintf(z.path, sizeof(z.path), "ipmi://%.200s/dcmi", st->host[0] ? st->host : "local");
	int zi = pd_set_add(set, &z);
	if (zi < 0) {
		snprintf(why, whylen, "no room for another zone");
		close(st->efd);
		free(st);
		return 0;
	}
	st->zi = (size_t)zi;
	*pd_set_state(set, &ipmi_source) = st;
	log_info("ipmi: DCMI power reading of %s (%s), every %.1f s", where(st->host),
		 !st->host[0]  ? "in-band"
		 : st->lanplus ? "IPMI 2.0 lanplus"
			       : "IPMI 1.5 lan",
		 (double)st->interval_ns / 1e9);
	ipmi_tend(set);
	return 1;
}

#define OFF(f) offsetof(struct ipmi_conf, f)
static const struct wb_conf_key ipmi_keys[] = {
    {"ipmi_host", WB_CONF_STR | WB_CONF_RESTART, OFF(ipmi_host), "", 0, 0, NULL,
     "the BMC for the ipmi source over the LAN (host name or address); empty: in-band (/dev/ipmi0)"},
    {"ipmi_credentials", WB_CONF_STR | WB_CONF_RESTART, OFF(ipmi_credentials), "", 0, 0, NULL,
     "file holding the BMC's USER:PASSWORD for ipmi_host; refused unless owned by powerd's user and mode 600 or stricter"},
    {"ipmi_protocol", WB_CONF_ENUM | WB_CONF_RESTART, OFF(ipmi_protocol), "lanplus", 0, 0,
     "lanplus|lan", "over the LAN: lanplus (IPMI 2.0, RMCP+) or lan (IPMI 1.5, MD5)"},
    {"ipmi_interval", WB_CONF_DURATION | WB_CONF_RESTART, OFF(ipmi_interval_ns), "5s", 1e9, 3600e9,
     NULL, "how often the DCMI power reading is asked for (1s..1h)"},
    {"ipmi_timeout", WB_CONF_DURATION | WB_CONF_RESTART, OFF(ipmi_timeout_ns), "5s", 100e6, 60e9,
     NULL, "longest wait for the BMC's session and answer over the LAN"},
};
#undef OFF

const struct pd_source ipmi_source = {
    .name = "ipmi",
    .in_auto = false,
    .keys = ipmi_keys,
    .nkeys = sizeof(ipmi_keys) / sizeof(ipmi_keys[0]),
    .conf_size = sizeof(struct ipmi_conf),
    .power_from = "from the BMC's DCMI watts, held between its updates",
    .discover = ipmi_discover,
    .check = ipmi_check,
    .read = pd_zone_read_held,
    .watch_fd = ipmi_watch_fd,
    .on_readable = ipmi_on_readable,
    .tend = ipmi_tend,
    .destroy = ipmi_destroy,
};
