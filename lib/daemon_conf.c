/*
 * A daemon's config: [global] and the stage's keys from the file, the
 * environment (WATTBUS_<SECTION>_<KEY>) and --key flags, --help and
 * --print-config, and the reload on SIGHUP.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon_int.h"
#include "log.h"

#define DEFAULT_CONFIG WB_SYSCONFDIR "/wattbus/wattbus.conf"

static const struct wb_conf_key global_keys[] = {
    {"host", WB_CONF_UTF8 | WB_CONF_RESTART, offsetof(struct wb_global, host), "", 0, 0, NULL,
     "host name in topics and messages, UTF-8 without control characters (default: this machine's hostname)"},
    {"runtime_dir", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct wb_global, runtime_dir), "", 0,
     0, NULL,
     "directory of the ipc sockets (default: $WATTBUS_RUNTIME_DIR, else /run/wattbus as root, else $XDG_RUNTIME_DIR/wattbus)"},
    {"log_level", WB_CONF_ENUM, offsetof(struct wb_global, log_level), "info", 0, 0,
     "error|warning|info|debug", "least severe level logged"},
    {"stat_interval", WB_CONF_DURATION | WB_CONF_RESTART,
     offsetof(struct wb_global, stat_interval_ns), "5s", 1e8, 3600e9, NULL,
     "how often the stage publishes its stat message (with a sample or a message it receives; "
     "from a timer, half as late again, when none comes)"},
    {"reconnect_max", WB_CONF_DURATION | WB_CONF_RESTART,
     offsetof(struct wb_global, reconnect_max_ns), "2s", 1e8, 600e9, NULL,
     "longest wait between tries to connect to a stage that is not there (from 100 ms, doubling)"},
    {"hwm", WB_CONF_INT | WB_CONF_RESTART, offsetof(struct wb_global, hwm), "10000", 1, 10000000,
     NULL, "ZeroMQ high-water mark (messages queued per peer before drops)"},
    {"curve_cert", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct wb_global, curve_cert), "", 0, 0,
     NULL, "CURVE certificate (with secret key) of this stage; empty: no encryption"},
    {"curve_peer", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct wb_global, curve_peer), "", 0, 0,
     NULL, "public certificate of the publishers this stage subscribes to"},
    {"curve_allow", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct wb_global, curve_allow), "", 0,
     0, NULL,
     "directory of public certificates allowed to subscribe (empty: any client with a valid key)"},
    {"socket_group", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct wb_global, socket_group), "", 0,
     0, NULL,
     "group owning the ipc sockets (mode 0660) and the state files (0640); without it state files are 0600"},
    {"max_ahead", WB_CONF_DURATION | WB_CONF_RESTART, offsetof(struct wb_global, max_ahead_ns),
     "5m", 0, 86400e9, NULL,
     "refuse a received message whose time is this far ahead of this host's clock (implausible_time); 0: off"},
    {"max_behind", WB_CONF_DURATION | WB_CONF_RESTART, offsetof(struct wb_global, max_behind_ns),
     "0", 0, 3650 * 86400e9, NULL,
     "refuse a received message whose time is this far behind this host's clock; 0: off (replayed recordings are old)"},
    {"max_slot", WB_CONF_DURATION | WB_CONF_RESTART, offsetof(struct wb_global, max_slot_ns), "1h",
     0, 30 * 86400e9, NULL,
     "refuse a received slot (aligned, estimate) longer than this; alignd forms none longer; 0: off"},
    {"max_zone_w", WB_CONF_DOUBLE | WB_CONF_RESTART, offsetof(struct wb_global, max_zone_w), "5000",
     0, 1e7, NULL,
     "a zone's plausible maximum power (W): received energy implying more is refused (implausible_power); powerd's max_power_w and alignd's bridge_max_w default to it; 0: off"},
    {"max_host_w", WB_CONF_DOUBLE | WB_CONF_RESTART, offsetof(struct wb_global, max_host_w),
     "50000", 0, 1e9, NULL,
     "a host's plausible maximum power (W), its zones' powers summed: received energy implying more is refused (implausible_power); 0: off"},
    {"extra_power_src", WB_CONF_LIST | WB_CONF_RESTART, offsetof(struct wb_global, extra_power_src),
     "", 0, 0, NULL,
     "srcs that may publish power for a host beside its own producer (a platform meter beside RAPL), with zones of their own; any other second src is refused (duplicate_producer)"},
};
#define NGLOBAL (sizeof(global_keys) / sizeof(global_keys[0]))

void daemon_sections(struct wb_daemon *d, struct wb_global *g, void *conf,
		     struct wb_conf_section secs[2])
{
	secs[0] = (struct wb_conf_section){"global", global_keys, NGLOBAL, g};
	secs[1] = (struct wb_conf_section){d->stage->name, d->stage->keys, d->stage->nkeys, conf};
}

static void usage(struct wb_daemon *d, FILE *out)
{
	struct wb_conf_section secs[2];
	daemon_sections(d, &d->global, d->conf, secs);
	fprintf(
	    out,
	    "usage: %s%s [-c FILE] [-n] [-v] [--KEY VALUE ...]\n%s\n\n"
	    "  -c, --config FILE        config file (default %s when it exists, or $WATTBUS_CONF)\n"
	    "  -n, --check              check the config and exit (0 valid, 2 invalid)\n"
	    "  -v, --verbose            log at debug level\n"
	    "      --print-config       print [global] and [%s] as a commented config file\n"
	    "  -h, --help               this text\n"
	    "  -V, --version            print the version\n\n"
	    "Every key is also a variable WATTBUS_<SECTION>_<KEY> (WATTBUS_GLOBAL_HOST): flags override it, it overrides the file.\n\n"
	    "[%s] keys, also flags:\n",
	    d->stage->program ? "" : "wattbus-",
	    d->stage->program ? d->stage->program : d->stage->name, d->stage->summary,
	    DEFAULT_CONFIG, d->stage->name, d->stage->name);
	wb_conf_usage(&secs[1], out);
	fprintf(out, "\n[global] keys, also flags:\n");
	wb_conf_usage(&secs[0], out);
	if (d->stage->man)
		fprintf(out, "\nSee %s.\n", d->stage->man);
	else
		fprintf(out, "\nSee wattbus-%s(8).\n", d->stage->name);
}

int wb_default_runtime_dir(char *buf, size_t size)
{
	const char *env = getenv("WATTBUS_RUNTIME_DIR");
	if (env && env[0])
		return snprintf(buf, size, "%s", env);
	if (geteuid() == 0)
		return snprintf(buf, size, "/run/wattbus");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && xdg[0])
		return snprintf(buf, size, "%s/wattbus", xdg);
	return snprintf(buf, size, "/tmp/wattbus-%u", (unsigned)geteuid());
}

static void envset_clear(struct wb_daemon *d)
{
	for (size_t i = 0; i < d->nenvset; i++)
		free(d->envset[i]);
	free(d->envset);
	d->envset = NULL;
	d->nenvset = 0;
}

/* Note a key the environment set, and the flag that overrides it if any (for -n and the startup
 * log). */
static void on_env(const char *var, const struct wb_conf_section *sec, const struct wb_conf_key *k,
		   const char *value, void *arg)
{
	struct wb_daemon *d = arg;
	const char *flag = NULL;
	for (size_t i = 0; i < d->nflags; i++)
		if (d->flags[i].sec == (strcmp(sec->name, "global") == 0 ? 0 : 1) &&
		    strcmp(d->flags[i].key, k->name) == 0)
			flag = d->flags[i].key;
	char *line, **v = realloc(d->envset, (d->nenvset + 1) * sizeof(*v));
	if (!v)
		return;
	d->envset = v;
	if (asprintf(&line, "%s: [%s] %s = %s%s%s", var, sec->name, k->name, value,
		     flag ? ", overridden by --" : "", flag ? flag : "") < 0)
		return;
	v[d->nenvset++] = line;
}

/* defaults -> file -> WATTBUS_<SECTION>_<KEY> -> flags -> %r/%h -> stage check, into g and conf. */
int daemon_load_config(struct wb_daemon *d, struct wb_global *g, void *conf, char *err,
		       size_t errlen)
{
	struct wb_conf_section secs[2];
	daemon_sections(d, g, conf, secs);
	if (wb_conf_defaults(secs, 2, err, errlen) < 0)
		return -1;
	if (d->config_path && wb_conf_load(d->config_path, secs, 2, err, errlen) < 0)
		return -1;
	envset_clear(d);
	if (wb_conf_env(secs, 2, environ, on_env, d, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < d->nflags; i++) {
		char origin[80];
		snprintf(origin, sizeof(origin), "--%s", d->flags[i].key);
		if (wb_conf_set(&secs[d->flags[i].sec], d->flags[i].key, d->flags[i].value, origin,
				err, errlen) < 0)
			return -1;
	}
	if (!g->host[0]) {
		char h[HOST_NAME_MAX + 1] = "localhost";
		gethostname(h, sizeof(h));
		h[sizeof(h) - 1] = '\0';
		free(g->host);
		g->host = strdup(h);
	}
	if (strlen(g->host) > 63) {
		snprintf(err, errlen, "[global] host: '%s' is longer than 63 characters", g->host);
		return -1;
	}
	/* The host is the second part of every topic (KIND/HOST) and goes into file names
	 * (%h): a '/' would make it two. */
	if (strchr(g->host, '/')) {
		snprintf(err, errlen, "[global] host: '%s' holds a '/' (topics are KIND/HOST)",
			 g->host);
		return -1;
	}
	if (!g->runtime_dir[0]) {
		char r[PATH_MAX];
		wb_default_runtime_dir(r, sizeof(r));
		free(g->runtime_dir);
		g->runtime_dir = strdup(r);
	}
	if (!g->host || !g->runtime_dir || wb_conf_expand(secs, 2, g->runtime_dir, g->host) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!wb_conf_find(&secs[1], "pub")) {
		snprintf(err, errlen, "stage %s has no 'pub' key (programming error)",
			 d->stage->name);
		return -1;
	}
	if (d->stage->check && d->stage->check(conf, err, errlen) < 0) {
		/* The check names keys; say which of them came from the environment. */
		for (size_t i = 0, used = strlen(err); i < d->nenvset && used + 1 < errlen; i++) {
			int w =
			    snprintf(err + used, errlen - used, "%s%.*s",
				     i ? ", " : " (environment: ", (int)strcspn(d->envset[i], ":"),
				     d->envset[i]);
			used = w < 0 ? errlen : used + (size_t)w;
			if (i + 1 == d->nenvset && used + 1 < errlen)
				snprintf(err + used, errlen - used, ")");
		}
		return -1;
	}
	return 0;
}

static void free_config(struct wb_daemon *d, struct wb_global *g, void *conf)
{
	struct wb_conf_section secs[2];
	daemon_sections(d, g, conf, secs);
	wb_conf_free(secs, 2);
}

static int add_flag(struct wb_daemon *d, int sec, const struct wb_conf_key *k, const char *value)
{
	/* A list flag given again appends: --sub a --sub b. */
	for (size_t i = 0; i < d->nflags; i++)
		if (WB_CONF_IS_LIST(k) && d->flags[i].sec == sec &&
		    strcmp(d->flags[i].key, k->name) == 0) {
			char *joined;
			if (asprintf(&joined, "%s,%s", d->flags[i].value, value) < 0)
				return -1;
			free(d->flags[i].value);
			d->flags[i].value = joined;
			return 0;
		}
	struct flag *f = realloc(d->flags, (d->nflags + 1) * sizeof(*f));
	if (!f)
		return -1;
	d->flags = f;
	f[d->nflags] = (struct flag){sec, k->name, strdup(value)};
	if (!f[d->nflags].value)
		return -1;
	d->nflags++;
	return 0;
}

void daemon_parse_args(struct wb_daemon *d, int argc, char **argv, bool *check_only)
{
	size_t nkeys = NGLOBAL + d->stage->nkeys;
	struct option *opts = calloc(2 * nkeys + 7, sizeof(*opts));
	if (!opts)
		fatalx(WB_EXIT_FAILURE, "out of memory");
	size_t n = 0;
	opts[n++] = (struct option){"config", required_argument, NULL, 'c'};
	opts[n++] = (struct option){"check", no_argument, NULL, 'n'};
	opts[n++] = (struct option){"verbose", no_argument, NULL, 'v'};
	opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	opts[n++] = (struct option){"version", no_argument, NULL, 'V'};
	opts[n++] = (struct option){"print-config", no_argument, NULL, 'P'};
	/* Every key is a flag, spelt as in the file (--model_from) or with dashes (--model-from).
	 */
	char **dashed = calloc(2 * nkeys + 1, sizeof(*dashed));
	size_t ndashed = 0;
	if (!dashed)
		fatalx(WB_EXIT_FAILURE, "out of memory");
	for (size_t i = 0; i < nkeys; i++) {
		bool global = i >= d->stage->nkeys;
		const char *name =
		    global ? global_keys[i - d->stage->nkeys].name : d->stage->keys[i].name;
		int val = global ? 2000 + (int)(i - d->stage->nkeys) : 1000 + (int)i;
		opts[n++] = (struct option){name, required_argument, NULL, val};
		if (strchr(name, '_')) {
			char *alias = strdup(name);
			if (!alias)
				fatalx(WB_EXIT_FAILURE, "out of memory");
			for (char *p = alias; *p; p++)
				if (*p == '_')
					*p = '-';
			dashed[ndashed++] = alias;
			opts[n++] = (struct option){alias, required_argument, NULL, val};
		}
	}

	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:nvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			free(d->config_path);
			if (!(d->config_path = strdup(optarg)))
				fatalx(WB_EXIT_FAILURE, "out of memory");
			d->config_explicit = true;
			break;
		case 'n':
			*check_only = true;
			break;
		case 'v':
			d->verbose = true;
			break;
		case 'h':
			free(opts);
			usage(d, stdout);
			exit(WB_EXIT_OK);
		case 'V':
			free(opts);
			printf("wattbus-%s %s\n", d->stage->name, WB_VERSION);
			exit(WB_EXIT_OK);
		case 'P': {
			free(opts);
			struct wb_conf_section secs[2];
			daemon_sections(d, &d->global, d->conf, secs);
			wb_conf_print_ini(&secs[0], "Shared by every stage.", stdout);
			putchar('\n');
			wb_conf_print_ini(&secs[1], d->stage->summary, stdout);
			exit(WB_EXIT_OK);
		}
		case ':':
			fprintf(stderr, "wattbus-%s: %s needs a value\n", d->stage->name,
				argv[optind - 1]);
			exit(WB_EXIT_USAGE);
		case '?':
			fprintf(stderr, "wattbus-%s: unknown option '%s' (see --help)\n",
				d->stage->name, argv[optind - 1]);
			exit(WB_EXIT_USAGE);
		default: {
			bool global = c >= 2000;
			const struct wb_conf_key *k =
			    global ? &global_keys[c - 2000] : &d->stage->keys[c - 1000];
			if (add_flag(d, global ? 0 : 1, k, optarg) < 0)
				fatalx(WB_EXIT_FAILURE, "out of memory");
		}
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wattbus-%s: unexpected argument '%s' (see --help)\n",
			d->stage->name, argv[optind]);
		exit(WB_EXIT_USAGE);
	}
	free(opts);
	for (size_t i = 0; i < ndashed; i++)
		free(dashed[i]);
	free(dashed);
	if (!d->config_path) {
		const char *env = getenv("WATTBUS_CONF");
		if (env && env[0]) {
			d->config_path = strdup(env);
			d->config_explicit = true;
		} else if (access(DEFAULT_CONFIG, F_OK) == 0) {
			d->config_path = strdup(DEFAULT_CONFIG);
		}
		if ((env && env[0]) || access(DEFAULT_CONFIG, F_OK) == 0)
			if (!d->config_path)
				fatalx(WB_EXIT_FAILURE, "out of memory");
	}
}

void daemon_conf_free(struct wb_daemon *d)
{
	free_config(d, &d->global, d->conf);
	free(d->conf);
	for (size_t i = 0; i < d->nflags; i++)
		free(d->flags[i].value);
	free(d->flags);
	envset_clear(d);
	free(d->config_path);
}

void daemon_reload(struct wb_daemon *d)
{
	sd_notify(0, "RELOADING=1");
	struct wb_global g = {0};
	void *conf = calloc(1, d->stage->conf_size);
	char err[WB_CONF_ERR_MAX];
	if (!conf) {
		log_errx("reload: out of memory");
	} else if (daemon_load_config(d, &g, conf, err, sizeof(err)) < 0) {
		log_errx("reload failed, keeping the running config: %s", err);
	} else {
		log_set_level(d->verbose ? WB_LOG_DEBUG : log_level_parse(g.log_level));
		free(d->global.log_level);
		d->global.log_level = g.log_level;
		g.log_level = NULL;
		/* [global] keys read at startup only: say which changed rather than drop them
		 * silently. */
		struct wb_conf_section gsec = {"global", global_keys, NGLOBAL, NULL};
		char keys[256], later[sizeof(keys) + 64] = "";
		if (wb_conf_restart_changes(&gsec, &d->global, &g, keys, sizeof(keys)))
			snprintf(later, sizeof(later),
				 "; [global] %s keep their old values until a restart", keys);
		if (d->reload_fn && d->reload_fn(d, conf, d->reload_arg) == 0) {
			free_config(d, &(struct wb_global){0}, d->conf);
			free(d->conf);
			d->conf = conf;
			conf = NULL;
			log_info("reloaded %s%s",
				 d->config_path ? d->config_path : "(built-in defaults)", later);
		} else {
			log_info("reloaded the log level; other changes need a restart%s", later);
		}
	}
	if (conf) {
		free_config(d, &(struct wb_global){0}, conf);
		free(conf);
	}
	struct wb_conf_section secs[2];
	daemon_sections(d, &g, NULL, secs);
	wb_conf_free(secs, 1);
	sd_notify(0, "READY=1");
}

void wb_daemon_on_reload(struct wb_daemon *d, wb_reload_fn *fn, void *arg)
{
	d->reload_fn = fn;
	d->reload_arg = arg;
}
