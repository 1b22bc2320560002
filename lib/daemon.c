/*
 * Daemon scaffolding shared by the five stages: config file and flags, signals
 * read from a signalfd in the one zloop, the PUB socket and its stat messages,
 * and sd_notify readiness and watchdog.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "clock.h"
#include "daemon.h"
#include "heap.h"
#include "job.h"
#include "json.h"
#include "log.h"
#include "state.h"
#include "vis.h"

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

/* A --key value from the command line, re-applied over the file on reload. */
struct flag {
	int sec; /* 0 global, 1 stage */
	const char *key;
	char *value;
};

struct subscription {
	struct wb_daemon *d;
	struct wb_sub *sub;
	wb_msg_fn *fn;
	void *arg;
};

struct fdwatch {
	struct wb_daemon *d;
	int fd;
	wb_fd_fn *fn;
	void *arg;
	wb_grid_fn *grid_fn;
	uint64_t interval_ns;
};

/* A grid timer is an fd watch whose fd is its timerfd. */
struct wb_grid {
	struct fdwatch w;
};

static void publish_stat(struct wb_daemon *d);
static int stat_schedule(struct wb_daemon *d);

struct wb_daemon {
	const struct wb_stage *stage;
	struct wb_global global;
	void *conf;
	char *config_path; /* NULL: defaults only */
	bool config_explicit;
	struct flag *flags;
	size_t nflags;
	char **envset; /* "WATTBUS_X_Y: [x] y = value" for each key the environment set */
	size_t nenvset;
	bool verbose;

	zloop_t *loop;
	int sigfd;
	int stopfd[2];
	struct wb_pub *pub;
	struct wb_sockopts sockopts;
	zlistx_t *subs;	   /* struct subscription */
	zlistx_t *watches; /* struct fdwatch */
	struct wb_stats stats;
	char mode[32];
	uint64_t start_ns, start_mono;
	int exit_code;
	wb_reload_fn *reload_fn;
	void *reload_arg;
	wb_stat_fn *stat_fn;
	void *stat_arg;
	struct wb_chore stat_chore; /* the stat messages, unless stat_grid's ticks carry them */
	bool stat_on_ticks;
	struct wb_grid *stat_grid; /* wb_grid_carry_stats */
	uint64_t stat_last_mono;
};

static void sections(struct wb_daemon *d, struct wb_global *g, void *conf,
		     struct wb_conf_section secs[2])
{
	secs[0] = (struct wb_conf_section){"global", global_keys, NGLOBAL, g};
	secs[1] = (struct wb_conf_section){d->stage->name, d->stage->keys, d->stage->nkeys, conf};
}

static void usage(struct wb_daemon *d, FILE *out)
{
	struct wb_conf_section secs[2];
	sections(d, &d->global, d->conf, secs);
	fprintf(
	    out,
	    "usage: wattbus-%s [-c FILE] [-n] [-v] [--KEY VALUE ...]\n%s\n\n"
	    "  -c, --config FILE        config file (default %s when it exists, or $WATTBUS_CONF)\n"
	    "  -n, --check              check the config and exit (0 valid, 2 invalid)\n"
	    "  -v, --verbose            log at debug level\n"
	    "      --print-config       print [global] and [%s] as a commented config file\n"
	    "  -h, --help               this text\n"
	    "  -V, --version            print the version\n\n"
	    "Every key is also a variable WATTBUS_<SECTION>_<KEY> (WATTBUS_GLOBAL_HOST): flags override it, it overrides the file.\n\n"
	    "[%s] keys, also flags:\n",
	    d->stage->name, d->stage->summary, DEFAULT_CONFIG, d->stage->name, d->stage->name);
	wb_conf_usage(&secs[1], out);
	fprintf(out, "\n[global] keys, also flags:\n");
	wb_conf_usage(&secs[0], out);
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
static int load_config(struct wb_daemon *d, struct wb_global *g, void *conf, char *err,
		       size_t errlen)
{
	struct wb_conf_section secs[2];
	sections(d, g, conf, secs);
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
	sections(d, g, conf, secs);
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

static void parse_args(struct wb_daemon *d, int argc, char **argv, bool *check_only)
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
			sections(d, &d->global, d->conf, secs);
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

struct wb_daemon *wb_daemon_new(const struct wb_stage *stage, int argc, char **argv)
{
	wb_heap_init();
	struct wb_daemon *d = calloc(1, sizeof(*d));
	if (!d || !(d->conf = calloc(1, stage->conf_size)))
		fatalx(WB_EXIT_FAILURE, "out of memory");
	d->stage = stage;
	d->sigfd = d->stopfd[0] = d->stopfd[1] = -1;
	d->stat_chore = (struct wb_chore){.d = d, .late_id = -1};
	d->start_ns = wb_now_ns();
	d->start_mono = wb_mono_ns();
	snprintf(d->mode, sizeof(d->mode), "starting");
	char prog[64];
	snprintf(prog, sizeof(prog), "wattbus-%s", stage->name);
	log_init(strdup(prog), WB_LOG_INFO);

	bool check_only = false;
	parse_args(d, argc, argv, &check_only);
	char err[WB_CONF_ERR_MAX];
	if (load_config(d, &d->global, d->conf, err, sizeof(err)) < 0) {
		/* the error quotes the value, which may hold what the stage refused: escaped */
		fprintf(stderr, "wattbus-%s: %s\n", stage->name, WB_VIS(err));
		exit(WB_EXIT_USAGE);
	}
	if (check_only) {
		printf("%s: ok\n", d->config_path ? d->config_path : "(built-in defaults)");
		for (size_t i = 0; i < d->nenvset; i++)
			printf("%s\n", d->envset[i]);
		exit(WB_EXIT_OK);
	}
	log_set_level(d->verbose ? WB_LOG_DEBUG : log_level_parse(d->global.log_level));
	for (size_t i = 0; i < d->nenvset; i++)
		log_info("environment %s", d->envset[i]);

	/* Block the signals before ZeroMQ starts its threads, so only the signalfd sees them. */
	/* A shell starts background jobs with SIGINT ignored; an ignored signal never
	 * reaches a signalfd, so take the default back first. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sigfd < 0 || pipe2(d->stopfd, O_CLOEXEC | O_NONBLOCK) < 0)
		fatalx(WB_EXIT_FAILURE, "signalfd/pipe: %s", strerror(errno));
	zsys_handler_set(NULL);
	zsys_set_logstream(stderr);

	/* State files and directories the stage makes are for its user and the socket group only.
	 */
	if (d->global.socket_group[0]) {
		struct group *gr = getgrnam(d->global.socket_group);
		if (gr)
			wb_state_set_group(gr->gr_gid);
		else
			log_warnx(
			    "[global] socket_group '%s' does not exist: state files are for this user only",
			    d->global.socket_group);
	}
	if (wb_state_mkdir(d->global.runtime_dir, err, sizeof(err)) < 0) {
		if (errno == EPERM)
			fatalx(WB_EXIT_FAILURE, "runtime dir %s", err);
		log_warnx("runtime dir %s", err);
	}
	d->sockopts = (struct wb_sockopts){
	    .hwm = (int)d->global.hwm,
	    .reconnect_max_ms = (int)(d->global.reconnect_max_ns / 1000000),
	    .curve_cert = d->global.curve_cert,
	    .curve_peer = d->global.curve_peer,
	    .curve_allow = d->global.curve_allow,
	    .ipc_group = d->global.socket_group,
	    .plaus = {d->global.max_ahead_ns, d->global.max_behind_ns, d->global.max_slot_ns,
		      d->global.max_zone_w, d->global.max_host_w, true, &d->global.extra_power_src},
	};
	struct wb_conf_section secs[2];
	sections(d, &d->global, d->conf, secs);
	const struct wb_conf_key *pubk = wb_conf_find(&secs[1], "pub");
	const char *pub_ep = *(char **)((char *)d->conf + pubk->off);
	d->pub = wb_pub_new(pub_ep, stage->name, d->global.host, &d->sockopts);
	if (!d->pub)
		fatalx(WB_EXIT_FAILURE, "cannot publish on %s (is another wattbus-%s running?)",
		       pub_ep, stage->name);
	d->loop = zloop_new();
	d->subs = zlistx_new();
	d->watches = zlistx_new();
	if (!d->loop || !d->subs || !d->watches)
		fatalx(WB_EXIT_FAILURE, "out of memory");
	zloop_set_nonstop(d->loop, true);
	log_info("version %s, host %s, publishing on %s, config %s", WB_VERSION, d->global.host,
		 pub_ep, d->config_path ? d->config_path : "(built-in defaults)");
	return d;
}

void wb_daemon_destroy(struct wb_daemon **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct wb_daemon *d = *self_p;
	if (d->subs)
		for (struct subscription *s = zlistx_first(d->subs); s; s = zlistx_next(d->subs)) {
			wb_sub_destroy(&s->sub);
			free(s);
		}
	if (d->watches)
		for (struct fdwatch *w = zlistx_first(d->watches); w; w = zlistx_next(d->watches)) {
			if (w->grid_fn)
				close(w->fd);
			free(w);
		}
	zlistx_destroy(&d->subs);
	zlistx_destroy(&d->watches);
	zloop_destroy(&d->loop);
	wb_pub_destroy(&d->pub);
	free_config(d, &d->global, d->conf);
	free(d->conf);
	for (size_t i = 0; i < d->nflags; i++)
		free(d->flags[i].value);
	free(d->flags);
	envset_clear(d);
	free(d->config_path);
	if (d->sigfd >= 0)
		close(d->sigfd);
	if (d->stopfd[0] >= 0) {
		close(d->stopfd[0]);
		close(d->stopfd[1]);
	}
	free(d);
	*self_p = NULL;
}

void *wb_daemon_conf(struct wb_daemon *d)
{
	return d->conf;
}

const struct wb_global *wb_daemon_global(struct wb_daemon *d)
{
	return &d->global;
}

const char *wb_daemon_config_path(struct wb_daemon *d)
{
	return d->config_path;
}

struct wb_stats *wb_daemon_stats(struct wb_daemon *d)
{
	return &d->stats;
}

zloop_t *wb_daemon_loop(struct wb_daemon *d)
{
	return d->loop;
}

struct wb_pub *wb_daemon_pub(struct wb_daemon *d)
{
	return d->pub;
}

void wb_daemon_set_mode(struct wb_daemon *d, const char *mode)
{
	snprintf(d->mode, sizeof(d->mode), "%s", mode);
	sd_notifyf(0, "STATUS=mode %s", d->mode);
}

int wb_daemon_send(struct wb_daemon *d, struct wb_msg *msg)
{
	if (wb_pub_send(d->pub, msg) < 0) {
		/* A value past its schema bound is a message lost here: counted, not just logged.
		 */
		uint64_t *n = errno == EINVAL ? wb_stats_counter(&d->stats, "encode_failed") : NULL;
		if (n)
			(*n)++;
		return -1;
	}
	d->stats.frames_out++;
	return 0;
}

/* ---- subscriptions ---- */

static int on_sub_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
	struct subscription *s = arg;
	/* Drain what is queued, but yield to timers and signals now and then. */
	for (int i = 0; i < 256; i++) {
		struct wb_msg msg;
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_try_recv(s->sub, &msg, &rx, &err, &s->d->stats);
		if (rc < 0)
			break;
		if (rc == 1) {
			if (!rx.stale)
				s->fn(s->d, &msg, &rx, s->arg);
			wb_msg_clear(&msg);
		}
	}
	wb_chore_poke(&s->d->stat_chore, false);
	return 0;
}

int wb_daemon_subscribe(struct wb_daemon *d, const struct wb_strlist *endpoints,
			const char *const *prefixes, wb_msg_fn *fn, void *arg)
{
	struct subscription *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	s->d = d;
	s->fn = fn;
	s->arg = arg;
	s->sub = wb_sub_new(&d->sockopts);
	if (!s->sub) {
		free(s);
		return -1;
	}
	for (size_t i = 0; i < endpoints->n; i++)
		if (wb_sub_connect(s->sub, endpoints->v[i]) < 0)
			goto fail;
	for (size_t i = 0; prefixes && prefixes[i]; i++)
		wb_sub_subscribe(s->sub, prefixes[i]);
	if (zloop_reader(d->loop, wb_sub_sock(s->sub), on_sub_readable, s) < 0)
		goto fail;
	zloop_reader_set_tolerant(d->loop, wb_sub_sock(s->sub));
	zlistx_add_end(d->subs, s);
	for (size_t i = 0; i < endpoints->n; i++)
		log_info("subscribed to %s", endpoints->v[i]);
	return 0;
fail:
	wb_sub_destroy(&s->sub);
	free(s);
	return -1;
}

/* ---- timers and fds ---- */

int wb_daemon_timer(struct wb_daemon *d, uint64_t interval_ns, zloop_timer_fn *fn, void *arg)
{
	size_t ms = (size_t)((interval_ns + WB_NS_PER_MS - 1) / WB_NS_PER_MS);
	return zloop_timer(d->loop, ms ? ms : 1, 0, fn, arg);
}

int wb_daemon_timer_once(struct wb_daemon *d, uint64_t delay_ns, zloop_timer_fn *fn, void *arg)
{
	size_t ms = (size_t)((delay_ns + WB_NS_PER_MS - 1) / WB_NS_PER_MS);
	return zloop_timer(d->loop, ms ? ms : 1, 1, fn, arg);
}

void wb_daemon_timer_end(struct wb_daemon *d, int timer_id)
{
	if (timer_id >= 0)
		zloop_timer_end(d->loop, timer_id);
}

/* ---- chores and the checkpoint (lib/daemon.h) ---- */
static int on_chore_late(zloop_t *loop, int timer_id, void *arg);

static int chore_arm(struct wb_chore *c, uint64_t delay_ns)
{
	if (c->late_id < 0)
		c->late_id = wb_daemon_timer_once(c->d, delay_ns, on_chore_late, c);
	return c->late_id < 0 ? -1 : 0;
}

static void chore_run(struct wb_chore *c, bool late)
{
	c->next_ns = wb_mono_ns() + c->every_ns;
	wb_daemon_timer_end(c->d, c->late_id);
	c->late_id = -1;
	if (!c->pending)
		return;
	if (c->fn(c->arg, late) < 0) {
		chore_arm(c, c->every_ns); /* tried again, messages or not */
		return;
	}
	c->pending = c->always;
	if (c->pending)
		chore_arm(c, c->every_ns + c->late_ns);
}

static int on_chore_late(zloop_t *loop, int timer_id, void *arg)
{
	struct wb_chore *c = arg;
	c->late_id = -1; /* it fired once and is gone */
	chore_run(c, true);
	return 0;
}

int wb_chore_init(struct wb_chore *c, struct wb_daemon *d, uint64_t every_ns, uint64_t late_ns,
		  bool always, bool pending, wb_chore_fn *fn, void *arg)
{
	*c = (struct wb_chore){.d = d,
			       .every_ns = every_ns,
			       .late_ns = late_ns,
			       .next_ns = wb_mono_ns() + every_ns,
			       .late_id = -1,
			       .pending = pending || always,
			       .always = always,
			       .fn = fn,
			       .arg = arg};
	return every_ns && c->pending ? chore_arm(c, every_ns) : 0;
}

void wb_chore_poke(struct wb_chore *c, bool changed)
{
	if (changed)
		c->pending = true;
	if (!c->every_ns || !c->pending)
		return;
	uint64_t now = wb_mono_ns();
	if (now < c->next_ns)
		chore_arm(c, c->next_ns + c->late_ns - now);
	else
		chore_run(c, false);
}

void wb_chore_end(struct wb_chore *c)
{
	wb_daemon_timer_end(c->d, c->late_id);
	c->late_id = -1;
	c->every_ns = 0;
}

/* A save from the timer (before a silence) is fsync'd, and one a WB_JSON_SYNC_EVERY_NS. */
static int checkpoint_run(void *arg, bool late)
{
	struct wb_checkpoint *c = arg;
	uint64_t now = wb_mono_ns();
	bool sync = late || now >= c->next_sync_ns;
	if (c->save(c->arg, sync) < 0)
		return -1;
	if (sync)
		c->next_sync_ns = now + WB_JSON_SYNC_EVERY_NS;
	return 0;
}

void wb_checkpoint_init(struct wb_checkpoint *c, struct wb_daemon *d, uint64_t every_ns, bool dirty,
			wb_checkpoint_fn *save, void *arg)
{
	*c = (struct wb_checkpoint){.save = save, .arg = arg};
	wb_chore_init(&c->chore, d, every_ns, every_ns, false, dirty, checkpoint_run, c);
}

void wb_checkpoint_changed(struct wb_checkpoint *c)
{
	wb_chore_poke(&c->chore, true);
}

int wb_checkpoint_stop(struct wb_checkpoint *c)
{
	wb_chore_end(&c->chore);
	int rc = 0;
	if (c->chore.pending && (rc = c->save(c->arg, true)) == 0)
		c->chore.pending = false;
	return rc;
}

void wb_grid_tick_at(uint64_t now_ns, uint64_t interval_ns, uint64_t expirations,
		     struct wb_grid_tick *tick)
{
	tick->t_ns = now_ns - now_ns % interval_ns; /* the last grid instant not after now */
	tick->late_ns = now_ns - tick->t_ns;
	tick->missed = expirations > 1 ? expirations - 1 : 0;
}

/*
 * Arm a periodic CLOCK_REALTIME timer at the next multiple of interval_ns; the
 * kernel keeps it on the grid and counts the expirations a late read missed.
 * Cancelled (ECANCELED) when the clock is set.
 */
static int grid_arm(int fd, uint64_t interval_ns)
{
	uint64_t first = wb_grid_next(wb_now_ns(), interval_ns);
	struct itimerspec its = {
	    .it_value = {(time_t)(first / WB_NS_PER_SEC), (long)(first % WB_NS_PER_SEC)},
	    .it_interval = {(time_t)(interval_ns / WB_NS_PER_SEC),
			    (long)(interval_ns % WB_NS_PER_SEC)},
	};
	if (timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) < 0) {
		log_warn("timerfd_settime");
		return -1;
	}
	return 0;
}

static void grid_fire(struct fdwatch *w)
{
	uint64_t expirations;
	ssize_t got = read(w->fd, &expirations, sizeof(expirations));
	if (got < 0 && errno == ECANCELED) {
		/* The wall clock was set: a periodic absolute timer would wait out a step back,
		 * so arm it again on the grid of the new time. */
		log_info("wall clock changed; sampling grid re-armed");
		grid_arm(w->fd, w->interval_ns);
		return;
	}
	if (got != sizeof(expirations) || expirations == 0)
		return; /* spurious wake-up */
	struct wb_grid_tick tick;
	wb_grid_tick_at(wb_now_ns(), w->interval_ns, expirations, &tick);
	w->grid_fn(w->d, &tick, w->arg);
	/* the tick nearest to stat_interval after the last stat message */
	struct wb_daemon *d = w->d;
	if (d->stat_grid && &d->stat_grid->w == w && d->stat_on_ticks &&
	    wb_mono_ns() - d->stat_last_mono + w->interval_ns / 2 >= d->global.stat_interval_ns)
		publish_stat(d);
}

static int on_fd(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	struct fdwatch *w = arg;
	if (w->grid_fn) {
		grid_fire(w);
		return 0;
	}
	if (w->fn(w->d, w->fd, w->arg) < 0) {
		zmq_pollitem_t it = {NULL, w->fd, ZMQ_POLLIN, 0};
		zloop_poller_end(loop, &it);
		void *handle = zlistx_find(w->d->watches, w);
		if (handle)
			zlistx_delete(w->d->watches, handle);
		free(w);
	}
	return 0;
}

static int watch(struct wb_daemon *d, struct fdwatch *w)
{
	zmq_pollitem_t it = {NULL, w->fd, ZMQ_POLLIN, 0};
	if (zloop_poller(d->loop, &it, on_fd, w) < 0) {
		free(w);
		return -1;
	}
	zloop_poller_set_tolerant(d->loop, &it);
	zlistx_add_end(d->watches, w);
	return 0;
}

int wb_daemon_watch_fd(struct wb_daemon *d, int fd, wb_fd_fn *fn, void *arg)
{
	struct fdwatch *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	*w = (struct fdwatch){.d = d, .fd = fd, .fn = fn, .arg = arg};
	return watch(d, w);
}

struct wb_grid *wb_daemon_grid_timer(struct wb_daemon *d, uint64_t interval_ns, wb_grid_fn *fn,
				     void *arg)
{
	if (interval_ns == 0)
		return NULL;
	int fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0) {
		log_warn("timerfd_create");
		return NULL;
	}
	if (grid_arm(fd, interval_ns) < 0) {
		close(fd);
		return NULL;
	}
	struct wb_grid *g = calloc(1, sizeof(*g));
	if (!g) {
		close(fd);
		return NULL;
	}
	g->w = (struct fdwatch){
	    .d = d, .fd = fd, .grid_fn = fn, .arg = arg, .interval_ns = interval_ns};
	if (watch(d, &g->w) < 0) { /* watch frees g */
		close(fd);
		return NULL;
	}
	return g;
}

int wb_grid_rearm(struct wb_grid *g, uint64_t interval_ns)
{
	if (interval_ns == 0 || grid_arm(g->w.fd, interval_ns) < 0)
		return -1;
	g->w.interval_ns = interval_ns;
	if (g->w.d->stat_grid == g && stat_schedule(g->w.d) < 0)
		log_warnx("cannot set up the stat timer: %s", zmq_strerror(zmq_errno()));
	return 0;
}

void wb_grid_carry_stats(struct wb_grid *g)
{
	g->w.d->stat_grid = g;
}

void wb_daemon_on_reload(struct wb_daemon *d, wb_reload_fn *fn, void *arg)
{
	d->reload_fn = fn;
	d->reload_arg = arg;
}

void wb_daemon_on_stat(struct wb_daemon *d, wb_stat_fn *fn, void *arg)
{
	d->stat_fn = fn;
	d->stat_arg = arg;
}

void wb_daemon_stop(struct wb_daemon *d, int code)
{
	d->exit_code = code;
	if (write(d->stopfd[1], "x", 1) < 0)
		log_warn("stop pipe");
}

/* ---- stat ---- */

uint64_t wb_self_cpu_ns(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * WB_NS_PER_SEC +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

uint64_t wb_self_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, resident = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void publish_stat(struct wb_daemon *d)
{
	struct wb_counter rej[WB_R_COUNT];
	struct wb_counter ctr[WB_COUNTERS_MAX];
	struct wb_msg m = {.kind = WB_STAT};
	struct wb_stat *s = &m.stat;
	if (d->stat_fn)
		d->stat_fn(d, d->stat_arg);
	s->t = wb_now_ns();
	d->stat_last_mono = wb_mono_ns();
	snprintf(s->stage, sizeof(s->stage), "%s", d->stage->name);
	snprintf(s->version, sizeof(s->version), "%s", WB_VERSION);
	snprintf(s->mode, sizeof(s->mode), "%s", d->mode);
	s->uptime_ns = wb_mono_ns() - d->start_mono;
	s->cpu_ns = wb_self_cpu_ns();
	s->rss_bytes = wb_self_rss_bytes();
	s->frames_in = d->stats.frames_in;
	s->frames_out = d->stats.frames_out + 1; /* this message */
	s->lost = d->stats.lost;
	s->rejected = d->stats.rejected;
	s->restarts = d->stats.restarts;
	s->checkpoint_failures = d->stats.checkpoint_failures;
	for (int r = 0; r < WB_R_COUNT; r++)
		if (d->stats.rejected_by[r]) {
			snprintf(rej[s->n_rejected_by].name, sizeof(rej[0].name), "%s",
				 wb_reason_name(r));
			rej[s->n_rejected_by++].value = d->stats.rejected_by[r];
		}
	s->rejected_by = rej;
	for (size_t i = 0; i < d->stats.ncounters; i++) {
		snprintf(ctr[i].name, sizeof(ctr[i].name), "%s", d->stats.counters[i].name);
		ctr[i].value = d->stats.counters[i].value;
	}
	s->n_counters = d->stats.ncounters;
	s->counters = ctr;
	wb_daemon_send(d, &m); /* arrays are on the stack: no wb_msg_clear */
}

static int run_stat(void *arg, bool late)
{
	publish_stat(arg);
	return 0;
}

/*
 * The stat messages go out at the ticks of the grid that carries them, when it
 * ticks at least as often, right after what the tick sent: that costs no
 * wake-up of the loop (nor of libzmq's I/O thread) of their own. Else they are
 * a chore that rides on the messages the stage receives (the first one
 * stat_interval after the last stat message), from a timer only when none
 * comes for half a stat_interval more: the stages' stat messages then go out
 * with the slot's messages, and exportd, which receives them all, wakes for
 * them together.
 */
static int stat_schedule(struct wb_daemon *d)
{
	d->stat_on_ticks =
	    d->stat_grid && d->stat_grid->w.interval_ns <= d->global.stat_interval_ns;
	if (d->stat_on_ticks) {
		wb_chore_end(&d->stat_chore);
		return 0;
	}
	if (d->stat_chore.every_ns)
		return 0; /* running */
	/* A stage that subscribes to nothing has no message to wait for. */
	uint64_t every = d->global.stat_interval_ns, late = zlistx_size(d->subs) ? every / 2 : 0;
	return wb_chore_init(&d->stat_chore, d, every, late, true, true, run_stat, d);
}

static int on_watchdog(zloop_t *loop, int timer_id, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
	return 0;
}

static void reload(struct wb_daemon *d)
{
	sd_notify(0, "RELOADING=1");
	struct wb_global g = {0};
	void *conf = calloc(1, d->stage->conf_size);
	char err[WB_CONF_ERR_MAX];
	if (!conf) {
		log_errx("reload: out of memory");
	} else if (load_config(d, &g, conf, err, sizeof(err)) < 0) {
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
	sections(d, &g, NULL, secs);
	wb_conf_free(secs, 1);
	sd_notify(0, "READY=1");
}

static int on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	struct wb_daemon *d = arg;
	struct signalfd_siginfo si;
	while (read(d->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			reload(d);
			continue;
		}
		log_info("stopping on %s", strsignal((int)si.ssi_signo));
		return -1;
	}
	return 0;
}

static int on_stop(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	return -1;
}

int wb_daemon_run(struct wb_daemon *d)
{
	zmq_pollitem_t sig = {NULL, d->sigfd, ZMQ_POLLIN, 0};
	zmq_pollitem_t stop = {NULL, d->stopfd[0], ZMQ_POLLIN, 0};
	/* Without the signal fd in the loop SIGTERM would never stop it: fail now instead. */
	if (zloop_poller(d->loop, &sig, on_signal, d) < 0 ||
	    zloop_poller(d->loop, &stop, on_stop, d) < 0 || stat_schedule(d) < 0) {
		log_errx("cannot watch signals, the stop pipe or the stat timer: %s",
			 zmq_strerror(zmq_errno()));
		return WB_EXIT_FAILURE;
	}
	uint64_t wd_usec = 0;
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0)
		wb_daemon_timer(d, wd_usec * 1000 / 2, on_watchdog, d);
	publish_stat(d);
	sd_notifyf(0, "READY=1\nSTATUS=mode %s", d->mode);
	log_info("running (mode %s)", d->mode);
	zloop_start(d->loop);
	sd_notify(0, "STOPPING=1");
	/* A hung peer must not hold the stop past TimeoutStopSec: its job is cancelled, and one
	 * that does not end within the bound is left to end with the process. */
	wb_jobs_stop(WB_JOB_STOP_NS);
	publish_stat(d);
	return d->exit_code;
}
