/*
 * wattbus top: a live view of estimd's estimate messages in a plain terminal
 * (ANSI clear and home only, so it works over ssh): node watts per zone,
 * idle and active, then the processes, containers, pods and VMs using the most.
 * --plain prints the same frames without escape codes, for scripts and tests.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "bus.h"
#include "daemon.h"
#include "cli.h"
#include "clock.h"
#include "codec.h"

#define TOP_MAX_HOSTS 64
#define TOP_MIN_WIDTH 40

struct top_opts {
	bool plain;
	long long count; /* frames to draw, -1: until interrupted */
	uint64_t timeout_ns;
	const char *host; /* only this host */
	int rows;	  /* rows per table; 0: fit the terminal */
	int width;	  /* 0: $COLUMNS, the terminal, or 80 */
};

struct top_host {
	char host[sizeof(((struct wb_envelope *)0)->host)];
	struct wb_msg msg; /* the latest estimate, owned */
};

struct top {
	struct top_opts o;
	struct top_host hosts[TOP_MAX_HOSTS];
	size_t nhosts;
	struct wb_stats stats; /* rejected frames */
	uint64_t dropped_hosts;
};

/* One table row: a workload, its watts and CPU share in the slot. */
struct top_row {
	double w;
	double cpu_pct;
	const char *label;
	char extra[80];
	uint64_t pid;
};

static int top_width(const struct top_opts *o)
{
	if (o->width > 0)
		return o->width;
	const char *cols = getenv("COLUMNS");
	if (cols && atoi(cols) > 0)
		return atoi(cols);
	struct winsize ws;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

static int top_height(void)
{
	struct winsize ws;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
		return ws.ws_row;
	const char *lines = getenv("LINES");
	return lines && atoi(lines) > 0 ? atoi(lines) : 0;
}

/*
 * Which zones add up to the node without counting anything twice: a platform
 * meter (a BMC, ACPI) covers the whole machine, psys most of it (the two together
 * would count the machine twice: platform wins); otherwise package + dram (+ gpu,
 * other), since core and uncore are parts of package. For workloads
 * (workloads true), a platform zone that estimd did not attribute (all its
 * active energy unattributed: estimd's attribute_platform is off) counts as
 * absent, so their watts come from the zones they were given energy of.
 */
static bool top_whole(const struct wb_est_zone *z, bool workloads)
{
	if (!strcmp(z->zone, "psys"))
		return true;
	if (strcmp(z->zone, "platform"))
		return false;
	return !workloads || z->active_uj == 0 || z->unattributed_uj < z->active_uj;
}

static void top_zone_set(const struct wb_estimate *e, bool workloads, bool *use, char *label,
			 size_t size)
{
	bool whole = false, platform = false, parts = false;
	for (size_t i = 0; i < e->n_zones; i++) {
		const char *k = e->zones[i].zone;
		bool w = top_whole(&e->zones[i], workloads);
		whole |= w;
		platform |= w && !strcmp(k, "platform");
		parts |= !strcmp(k, "package") || !strcmp(k, "dram") || !strcmp(k, "gpu") ||
			 !strcmp(k, "other");
	}
	label[0] = '\0';
	for (size_t i = 0; i < e->n_zones; i++) {
		const char *k = e->zones[i].zone;
		if (whole)
			use[i] = top_whole(&e->zones[i], workloads) &&
				 (!platform || !strcmp(k, "platform"));
		else if (parts)
			use[i] = strcmp(k, "core") != 0 && strcmp(k, "uncore") != 0 &&
				 strcmp(k, "platform") != 0;
		else
			use[i] = true;
		if (use[i] && !strstr(label, k)) {
			size_t len = strlen(label);
			snprintf(label + len, size - len, "%s%s", len ? "+" : "", k);
		}
	}
}

/* Watts of a per-zone energy array over the chosen zones: uJ / ns * 1e3 = W. */
static double top_watts(const uint64_t *uj, size_t n, const bool *use, size_t nzones,
			uint64_t dt_ns)
{
	double sum = 0;
	for (size_t i = 0; i < n && i < nzones; i++)
		if (use[i])
			sum += (double)uj[i];
	return sum * 1e3 / (double)dt_ns;
}

static int row_cmp(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	if (x->w != y->w)
		return x->w > y->w ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->label, y->label);
}

/*
 * A line cut to the terminal width (bytes; names on the bus are ASCII in practice),
 * escaped as a whole (wb_vis): a comm or container name is data from another host's
 * kernel or kubelet and may hold an escape sequence. No format here holds a control.
 */
static void put_line(int width, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(int width, const char *fmt, ...)
{
	char raw[1024], buf[4 * sizeof(raw)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	wb_vis(buf, sizeof(buf), raw, strlen(raw), 0);
	if (width > 0 && width < (int)sizeof(buf))
		buf[width] = '\0';
	/* trailing blanks would wrap on a terminal exactly that wide */
	size_t len = strlen(buf);
	while (len && buf[len - 1] == ' ')
		buf[--len] = '\0';
	puts(buf);
}

static void table(const char *title, struct top_row *rows, size_t n, int limit, bool procs,
		  int width)
{
	if (!n)
		return;
	qsort(rows, n, sizeof(*rows), row_cmp);
	put_line(width, "%s", "");
	if (procs)
		put_line(width, "%-12s %9s %7s %8s  %-15s %s", title, "W", "CPU%", "PID", "COMM",
			 "CONTAINER");
	else
		put_line(width, "%-12s %9s %7s  %s", title, "W", "CPU%", "NAME");
	size_t shown = limit > 0 && (size_t)limit < n ? (size_t)limit : n;
	for (size_t i = 0; i < shown; i++) {
		if (procs)
			put_line(width, "%-12s %9.3f %7.1f %8llu  %-15s %s", "", rows[i].w,
				 rows[i].cpu_pct, (unsigned long long)rows[i].pid, rows[i].label,
				 rows[i].extra);
		else
			put_line(width, "%-12s %9.3f %7.1f  %s%s", "", rows[i].w, rows[i].cpu_pct,
				 rows[i].label, rows[i].extra);
	}
	if (shown < n)
		put_line(width, "%-12s (%zu more)", "", n - shown);
}

static size_t group_rows(const struct wb_est_group *g, size_t n, const bool *use, size_t nzones,
			 uint64_t dt_ns, struct top_row *rows)
{
	for (size_t i = 0; i < n; i++) {
		rows[i] = (struct top_row){
		    .w = top_watts(g[i].energy_uj, g[i].n_energy_uj, use, nzones, dt_ns),
		    .cpu_pct = (double)g[i].cpu_ns * 100.0 / (double)dt_ns,
		    .label = g[i].name[0] ? g[i].name : g[i].id,
		};
		if (g[i].name[0] && strcmp(g[i].name, g[i].id))
			snprintf(rows[i].extra, sizeof(rows[i].extra), " (%.12s)", g[i].id);
	}
	return n;
}

/* One host's block: header, zones, then the tables, cut to width (and height when known). */
static void render_host(const struct top *t, const struct wb_estimate *e, int width, int height)
{
	uint64_t dt_ns = e->t1 > e->t0 ? e->t1 - e->t0 : 1;
	double dt_s = (double)dt_ns / 1e9;
	bool use[256], wuse[256];
	char label[128], wlabel[128];
	top_zone_set(e, false, use, label, sizeof(label));
	top_zone_set(e, true, wuse, wlabel, sizeof(wlabel));

	time_t sec = (time_t)(e->t1 / WB_NS_PER_SEC);
	struct tm tm;
	char when[32] = "?";
	if (localtime_r(&sec, &tm))
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
	put_line(width, "host %s  slot ending %s (%.3f s)  %s%s%s  CPU %.1f%% of %u", e->env.host,
		 when, dt_s, e->mode, e->model[0] ? " " : "", e->model, e->cpu_usage_ratio * 100.0,
		 (unsigned)e->ncpu);
	put_line(width, "%s", "");
	put_line(width, "%-12s %9s %9s %9s %9s", "ZONE", "TOTAL W", "ACTIVE W", "IDLE W",
		 "UNATTR W");
	double tot = 0, act = 0, idle = 0, un = 0;
	for (size_t i = 0; i < e->n_zones; i++) {
		const struct wb_est_zone *z = &e->zones[i];
		double w = (double)z->energy_uj * 1e3 / (double)dt_ns,
		       a = (double)z->active_uj * 1e3 / (double)dt_ns,
		       id = (double)z->idle_uj * 1e3 / (double)dt_ns,
		       u = (double)z->unattributed_uj * 1e3 / (double)dt_ns;
		put_line(width, "%-12s %9.3f %9.3f %9.3f %9.3f", z->name, w, a, id, u);
		if (i < 256 && use[i]) {
			tot += w;
			act += a;
			idle += id;
			un += u;
		}
	}
	if (e->n_zones > 1)
		put_line(width, "%-12s %9.3f %9.3f %9.3f %9.3f  (%s)", "node", tot, act, idle, un,
			 label);

	/* Rows per table: what --rows says, or what fits the terminal. */
	size_t ngroups = (e->n_containers > 0) + (e->n_pods > 0) + (e->n_vms > 0);
	int limit = t->o.rows;
	int group_limit = t->o.rows;
	if (limit <= 0) {
		group_limit = 5;
		limit = 10;
		if (height > 0) {
			int used = 4 + (int)e->n_zones + (e->n_zones > 1) + 3 +
				   (int)ngroups * (group_limit + 3);
			limit = height - used > 3 ? height - used : 3;
		}
	}

	size_t nmax = e->n_procs;
	if (e->n_containers > nmax)
		nmax = e->n_containers;
	if (e->n_pods > nmax)
		nmax = e->n_pods;
	if (e->n_vms > nmax)
		nmax = e->n_vms;
	struct top_row *rows = calloc(nmax ? nmax : 1, sizeof(*rows));
	if (!rows) {
		put_line(width, "(out of memory)");
		return;
	}
	size_t live = 0;
	for (size_t i = 0; i < e->n_procs; i++) {
		const struct wb_est_proc *p = &e->procs[i];
		rows[live] = (struct top_row){
		    .w = top_watts(p->energy_uj, p->n_energy_uj, wuse, e->n_zones, dt_ns),
		    .cpu_pct = (double)p->cpu_ns * 100.0 / (double)dt_ns,
		    .label = p->comm,
		    .pid = p->pid,
		};
		snprintf(rows[live].extra, sizeof(rows[live].extra), "%.12s%s", p->container_id,
			 p->exited ? (p->container_id[0] ? " (exited)" : "(exited)") : "");
		live++;
	}
	table("PROCESSES", rows, live, limit, true, width);
	table("CONTAINERS", rows,
	      group_rows(e->containers, e->n_containers, wuse, e->n_zones, dt_ns, rows),
	      group_limit, false, width);
	table("PODS", rows, group_rows(e->pods, e->n_pods, wuse, e->n_zones, dt_ns, rows),
	      group_limit, false, width);
	table("VMS", rows, group_rows(e->vms, e->n_vms, wuse, e->n_zones, dt_ns, rows), group_limit,
	      false, width);
	free(rows);
}

static int host_cmp(const void *a, const void *b)
{
	return strcmp(((const struct top_host *)a)->host, ((const struct top_host *)b)->host);
}

static void render(struct top *t)
{
	int width = top_width(&t->o);
	if (width < TOP_MIN_WIDTH)
		width = TOP_MIN_WIDTH;
	int height = t->o.plain ? 0 : top_height();
	if (!t->o.plain)
		fputs("\033[H\033[2J", stdout); /* home, clear: all a plain terminal needs */
	qsort(t->hosts, t->nhosts, sizeof(t->hosts[0]), host_cmp);
	for (size_t i = 0; i < t->nhosts; i++) {
		if (i)
			put_line(width, "%s", "");
		render_host(t, &t->hosts[i].msg.estimate, width, t->nhosts == 1 ? height : 0);
	}
	if (t->stats.rejected || t->dropped_hosts) {
		put_line(width, "%s", "");
		put_line(width, "(%llu rejected frames, %llu estimates from hosts beyond %d)",
			 (unsigned long long)t->stats.rejected,
			 (unsigned long long)t->dropped_hosts, TOP_MAX_HOSTS);
	}
	if (t->o.plain)
		put_line(width, "%s", "");
	fflush(stdout);
}

/* Keep msg as the host's latest estimate (takes ownership). False when it is not shown. */
static bool top_take(struct top *t, struct wb_msg *msg)
{
	const char *host = msg->estimate.env.host;
	if (t->o.host && strcmp(host, t->o.host)) {
		wb_msg_clear(msg);
		return false;
	}
	struct top_host *h = NULL;
	for (size_t i = 0; i < t->nhosts && !h; i++)
		if (!strcmp(t->hosts[i].host, host))
			h = &t->hosts[i];
	if (!h) {
		if (t->nhosts == TOP_MAX_HOSTS) {
			t->dropped_hosts++;
			wb_msg_clear(msg);
			return false;
		}
		h = &t->hosts[t->nhosts++];
		snprintf(h->host, sizeof(h->host), "%s", host);
	} else {
		wb_msg_clear(&h->msg);
	}
	h->msg = *msg;
	return true;
}

/*
 * Keys from the terminal: `q` quits. The terminal goes out of line mode (no
 * echo, a key at a time; Ctrl-C still signals) while top runs, and back after.
 */
struct top_keys {
	bool on, quit;
	struct termios saved;
};

static void top_keys_open(struct top_keys *k, bool want)
{
	*k = (struct top_keys){0};
	if (!want || !isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &k->saved) < 0)
		return;
	struct termios raw = k->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	k->on = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
}

static void top_keys_close(struct top_keys *k)
{
	if (k->on)
		tcsetattr(STDIN_FILENO, TCSANOW, &k->saved);
	k->on = false;
}

/* Wait up to timeout_ms for an estimate (returns 1 when one is queued) or a key. */
static int top_wait(struct wb_sub *sub, struct top_keys *k, long timeout_ms)
{
	zmq_pollitem_t it[2] = {{zsock_resolve(wb_sub_sock(sub)), 0, ZMQ_POLLIN, 0},
				{NULL, STDIN_FILENO, ZMQ_POLLIN, 0}};
	if (zmq_poll(it, k->on ? 2 : 1, timeout_ms) <= 0)
		return 0;
	if (k->on && (it[1].revents & ZMQ_POLLIN)) {
		char buf[32];
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n <= 0)
			top_keys_close(k); /* the terminal went away: keep drawing */
		for (ssize_t i = 0; i < n; i++)
			k->quit |= buf[i] == 'q' || buf[i] == 'Q';
	}
	return (it[0].revents & ZMQ_POLLIN) != 0;
}

static void top_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: wattbus top [--once | --count N] [--plain] [--timeout DURATION] [--host HOST]\n"
	    "                   [--rows N] [--width N] [ENDPOINT]\n"
	    "  ENDPOINT         estimd's publisher (default: estimd.sock in $WATTBUS_RUNTIME_DIR, else in\n"
	    "                   run/ beside this program (make run's build/run/) or the default\n"
	    "                   runtime dir: /run/wattbus as root, $XDG_RUNTIME_DIR/wattbus, /tmp/wattbus-UID)\n"
	    "  -1, --once       draw one frame and exit (--count 1)\n"
	    "  -n, --count N    exit after N frames\n"
	    "  -p, --plain      no escape codes: frames one after another, for scripts\n"
	    "  -t, --timeout D  give up (exit 1) when no estimate arrives for this long (e.g. 10s)\n"
	    "  -H, --host HOST  only this host's estimates\n"
	    "  -r, --rows N     rows per table (default: fit the terminal; 10 with --plain)\n"
	    "  -w, --width N    line width (default: $COLUMNS, the terminal's, or 80)\n"
	    "  q                quits\n");
}

/*
 * No ENDPOINT: estimd's socket where the running stages keep theirs. While
 * there is none, say where top looks and wait for one, up to --timeout.
 */
static int top_find(const struct top *t, char *ep, size_t size)
{
	char looked[4 * PATH_MAX];
	if (cli_find_socket("estimd.sock", ep, size, looked, sizeof(looked)) == 0)
		return 0;
	fprintf(
	    stderr,
	    "wattbus top: no estimd socket yet: looked for %s; waiting (start the stages with make run or systemctl start wattbus.target, or give the ENDPOINT, or set WATTBUS_RUNTIME_DIR)\n",
	    looked);
	uint64_t start = wb_mono_ns();
	struct timespec pause = {0, 100 * 1000 * 1000};
	while (!cli_interrupted()) {
		if (t->o.timeout_ns && wb_mono_ns() - start >= t->o.timeout_ns) {
			fprintf(stderr,
				"wattbus top: no estimd socket after %.1f s: looked for %s\n",
				(double)t->o.timeout_ns / 1e9, looked);
			return -1;
		}
		nanosleep(&pause, NULL);
		if (cli_find_socket("estimd.sock", ep, size, looked, sizeof(looked)) == 0)
			return 0;
	}
	return -1;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {{"once", no_argument, NULL, '1'},
					     {"count", required_argument, NULL, 'n'},
					     {"plain", no_argument, NULL, 'p'},
					     {"timeout", required_argument, NULL, 't'},
					     {"host", required_argument, NULL, 'H'},
					     {"rows", required_argument, NULL, 'r'},
					     {"width", required_argument, NULL, 'w'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct top *t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "wattbus top: out of memory\n");
		return 1;
	}
	t->o.count = -1;
	int c, rc = 0;
	while ((c = getopt_long(argc, argv, "1n:pt:H:r:w:h", opts, NULL)) != -1) {
		switch (c) {
		case '1':
			t->o.count = 1;
			break;
		case 'n':
			t->o.count = cli_int("top", "--count", optarg, 1, LLONG_MAX);
			break;
		case 'p':
			t->o.plain = true;
			break;
		case 't':
			t->o.timeout_ns = cli_duration_ns("top", "--timeout", optarg);
			break;
		case 'H':
			t->o.host = optarg;
			break;
		case 'r':
			t->o.rows = (int)cli_int("top", "--rows", optarg, 1, 100000);
			break;
		case 'w':
			t->o.width = (int)cli_int("top", "--width", optarg, 1, 100000);
			break;
		case 'h':
			top_usage(stdout);
			free(t);
			return 0;
		default:
			rc = 2;
		}
	}
	if (!rc && argc - optind > 1) {
		fprintf(stderr, "wattbus top: one ENDPOINT at most\n");
		rc = 2;
	}
	if (rc) {
		top_usage(stderr);
		free(t);
		return rc;
	}
	char ep[PATH_MAX + 32], missing[PATH_MAX];
	if (optind < argc) {
		snprintf(ep, sizeof(ep), "%s", argv[optind]);
	} else if (top_find(t, ep, sizeof(ep)) < 0) {
		free(t);
		return cli_interrupted() ? 0 : 1;
	}
	bool absent = cli_ipc_missing(ep, missing, sizeof(missing));
	if (absent && t->o.plain)
		cli_say_missing("top", missing, 0);
	if (t->o.plain && !t->o.rows)
		t->o.rows = 10;

	struct wb_sub *sub = wb_sub_new(NULL);
	char prefix[WB_TOPIC_MAX];
	snprintf(prefix, sizeof(prefix), "estimate/%s", t->o.host ? t->o.host : "");
	if (!sub || wb_sub_connect(sub, ep) < 0 || wb_sub_subscribe(sub, prefix) < 0) {
		wb_sub_destroy(&sub);
		free(t);
		return 1;
	}
	if (!t->o.plain) {
		int width = top_width(&t->o);
		fputs("\033[H\033[2J", stdout);
		put_line(width, "wattbus top: waiting for estimates on %s", ep);
		if (absent)
			put_line(width, "(nothing listens there yet)");
		put_line(width, "q quits");
		fflush(stdout);
	}
	struct top_keys keys;
	top_keys_open(&keys, !t->o.plain);
	long long frames = 0;
	uint64_t last = wb_mono_ns();
	while (!cli_interrupted() && !keys.quit && (t->o.count < 0 || frames < t->o.count)) {
		if (absent)
			absent = cli_ipc_missing(ep, missing, sizeof(missing));
		if (t->o.timeout_ns && wb_mono_ns() - last >= t->o.timeout_ns) {
			if (absent)
				cli_say_missing("top", missing, t->o.timeout_ns);
			else
				fprintf(stderr, "wattbus top: no estimate on %s for %.1f s\n", ep,
					(double)t->o.timeout_ns / 1e9);
			rc = 1;
			break;
		}
		if (!top_wait(sub, &keys, 200))
			continue;
		/* Drain what is queued, then draw once: a slow terminal never falls behind the bus.
		 */
		bool got = false;
		for (;;) {
			struct wb_msg msg;
			struct wb_rx rx;
			struct wb_err err;
			int r = wb_sub_try_recv(sub, &msg, &rx, &err, &t->stats);
			if (r < 0)
				break;
			if (r == 0)
				continue; /* rejected: counted, logged rate-limited */
			if (msg.kind != WB_ESTIMATE) {
				wb_msg_clear(&msg);
				continue;
			}
			got |= top_take(t, &msg);
		}
		if (!got)
			continue;
		last = wb_mono_ns();
		render(t);
		frames++;
	}
	top_keys_close(&keys);
	for (size_t i = 0; i < t->nhosts; i++)
		wb_msg_clear(&t->hosts[i].msg);
	wb_sub_destroy(&sub);
	free(t);
	return rc;
}
