/*
 * wattbus top: a live view of estimd's estimate messages in a plain terminal
 * (ANSI clear and home only, so it works over ssh): node watts per zone,
 * idle and active, then the processes, containers, pods, VMs and GPUs using the
 * most, in tables that share the terminal's height so that a frame never scrolls.
 * --plain prints the same frames without escape codes, for scripts and tests.
 */
#include <errno.h>
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
	bool plain, once;
	int64_t count; /* frames to draw, 0: until interrupted */
	uint64_t timeout_ns;
	const char *host; /* only this host */
	int64_t rows;	  /* rows per table; 0: fit the terminal */
	int64_t width;	  /* 0: $COLUMNS, the terminal, or 80 */
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
	double active_w; /* GPUs: active watts */
	const char *label;
	char extra[160];
	uint64_t pid;
};

static int top_width(const struct top_opts *o)
{
	if (o->width > 0)
		return (int)o->width;
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

/* Back from pos to the start of a UTF-8 sequence, so that a cut never splits a character. */
static size_t utf8_floor(const char *s, size_t pos)
{
	while (pos > 0 && ((unsigned char)s[pos] & 0xc0) == 0x80)
		pos--;
	return pos;
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
	/* never half a character: a cut byte sequence is not UTF-8 to the terminal */
	if (width > 0 && width < (int)sizeof(buf))
		buf[utf8_floor(buf, (size_t)width)] = '\0';
	/* trailing blanks would wrap on a terminal exactly that wide */
	size_t len = strlen(buf);
	while (len && buf[len - 1] == ' ')
		buf[--len] = '\0';
	puts(buf);
}

/* A table's rows as drawn: how many shown, then a "+N more" line for the rest. */
struct top_table {
	const char *title;
	struct top_row *rows;
	size_t n;
	size_t shown;
	enum { TT_PROCS, TT_GROUPS, TT_GPUS } kind;
};

#define TOP_LABEL 256
/* The columns before a group table's name: "%-12s %9.3f %7.1f  " */
#define TOP_GROUP_PREFIX 32

/* text cut to w bytes as "head~tail" with tail_len bytes of its tail; as is when it fits. */
static void cut_head_tail(const char *text, size_t w, size_t tail_len, char *out, size_t size)
{
	size_t len = strlen(text);
	if (len <= w || w < 3) {
		snprintf(out, size, "%.*s", (int)(len <= w ? len : w), text);
		return;
	}
	size_t head = utf8_floor(text, w - 1 - tail_len);
	size_t tail = len - tail_len;
	while (tail < len && ((unsigned char)text[tail] & 0xc0) == 0x80)
		tail++;
	snprintf(out, size, "%.*s~%s", (int)head, text, text + tail);
}

/*
 * Fit each shown row's text into w bytes so that rows that differ still read differently at any
 * width: ids share long prefixes (pod uids, kubepods slices), so a cut keeps the head and the
 * tail ("head~tail"), its tail as long as it takes to tell the rows apart; rows that differ only
 * in the middle get "#1", "#2" at the end.
 */
static void fit_distinct(char (*out)[TOP_LABEL], char (*full)[TOP_LABEL], size_t n, size_t w)
{
	size_t max_tail = w > 3 ? w - 3 : 0;
	for (size_t tail = max_tail < 6 ? max_tail : 6;; tail++) {
		bool clash = false;
		for (size_t i = 0; i < n; i++)
			cut_head_tail(full[i], w, tail, out[i], TOP_LABEL);
		for (size_t i = 0; i < n && !clash; i++)
			for (size_t j = i + 1; j < n && !clash; j++)
				clash = !strcmp(out[i], out[j]) && strcmp(full[i], full[j]);
		if (!clash)
			return;
		if (tail >= max_tail)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned k = 0;
		for (size_t j = 0; j < n; j++)
			if (j != i && !strcmp(out[i], out[j]) && strcmp(full[i], full[j]))
				k++;
		if (!k)
			continue;
		/* number the clashing rows in order: a suffix "#N" replaces the end */
		unsigned nth = 1;
		for (size_t j = 0; j < i; j++)
			nth += !strcmp(out[i], out[j]) && strcmp(full[i], full[j]);
		char suffix[16];
		int sl = snprintf(suffix, sizeof(suffix), "#%u", nth);
		size_t keep = strlen(out[i]) + (size_t)sl > w && w > (size_t)sl
				  ? utf8_floor(out[i], w - (size_t)sl)
				  : strlen(out[i]);
		out[i][keep] = '\0';
		strncat(out[i], suffix, TOP_LABEL - keep - 1);
	}
}

static void table_draw(const struct top_table *tt, bool sep, int width)
{
	if (!tt->n)
		return;
	if (sep)
		put_line(width, "%s", "");
	if (tt->kind == TT_PROCS)
		put_line(width, "%-12s %9s %7s %8s  %-15s %s", tt->title, "W", "CPU%", "PID",
			 "COMM", "CONTAINER");
	else if (tt->kind == TT_GPUS)
		put_line(width, "%-12s %9s %9s  %s", tt->title, "W", "ACTIVE W", "NAME");
	else
		put_line(width, "%-12s %9s %7s  %s", tt->title, "W", "CPU%", "NAME");
	char(*full)[TOP_LABEL] = NULL, (*fit)[TOP_LABEL] = NULL;
	if (tt->kind == TT_GROUPS && tt->shown) {
		full = calloc(tt->shown, sizeof(*full));
		fit = calloc(tt->shown, sizeof(*fit));
	}
	if (full && fit) {
		for (size_t i = 0; i < tt->shown; i++)
			snprintf(full[i], TOP_LABEL, "%s%s", tt->rows[i].label, tt->rows[i].extra);
		size_t w = width > TOP_GROUP_PREFIX + 8 ? (size_t)width - TOP_GROUP_PREFIX : 8;
		fit_distinct(fit, full, tt->shown, w);
	}
	for (size_t i = 0; i < tt->shown; i++) {
		const struct top_row *r = &tt->rows[i];
		/* names come from the bus (kubelet, libvirt, a GPU's driver): put_line escapes them
		 */
		if (tt->kind == TT_PROCS)
			put_line(width, "%-12s %9.3f %7.1f %8llu  %-15s %s", "", r->w, r->cpu_pct,
				 (unsigned long long)r->pid, r->label, r->extra);
		else if (tt->kind == TT_GPUS)
			put_line(width, "%-12s %9.3f %9.3f  %s", r->label, r->w, r->active_w,
				 r->extra);
		else if (fit)
			put_line(width, "%-12s %9.3f %7.1f  %s", "", r->w, r->cpu_pct, fit[i]);
		else
			put_line(width, "%-12s %9.3f %7.1f  %s%s", "", r->w, r->cpu_pct, r->label,
				 r->extra);
	}
	free(full);
	free(fit);
	if (tt->shown < tt->n)
		put_line(width, "%-12s +%zu more", "", tt->n - tt->shown);
}

/*
 * Share avail lines among the tables that have rows: each gets its title, then lines go round,
 * one per table in turn, until every table shows all its rows or the lines run out. A table with
 * fewer lines than rows shows one row less and a "+N more" line. The blank lines (one after the
 * header, one before each table) are drawn only where each table still gets two lines besides
 * its title; returns whether they are.
 */
static bool top_share(struct top_table *tt, size_t nt, int avail)
{
	int used_tables = 0;
	for (size_t i = 0; i < nt; i++)
		used_tables += tt[i].n > 0;
	bool sep = avail - (1 + used_tables) >= 3 * used_tables;
	int budget = avail - (sep ? 1 + 2 * used_tables : used_tables);
	size_t lines[8] = {0};
	for (bool more = true; more && budget > 0;) {
		more = false;
		for (size_t i = 0; i < nt && budget > 0; i++)
			if (lines[i] < tt[i].n) {
				lines[i]++;
				budget--;
				more = true;
			}
	}
	for (size_t i = 0; i < nt; i++)
		tt[i].shown = lines[i] >= tt[i].n ? tt[i].n : lines[i] ? lines[i] - 1 : 0;
	return sep;
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
	qsort(rows, n, sizeof(*rows), row_cmp);
	return n;
}

static bool zone_is_gpu(const struct wb_est_zone *z)
{
	return !strcmp(z->zone, "gpu");
}

/* powerd's fake source: its zones' path says they are simulated (docs/powerd.md). */
static bool zone_is_simulated(const struct wb_est_zone *z)
{
	return wb_path_simulated(z->path);
}

/*
 * One host's block: header, the CPU zones and the node (always drawn), then the tables:
 * processes, containers, pods, VMs and GPUs, cut to width and, when the height is known,
 * sharing the lines left (top_share).
 */
static void render_host(const struct top *t, const struct wb_estimate *e, int width, int height)
{
	uint64_t dt_ns = e->t1 > e->t0 ? e->t1 - e->t0 : 1;
	double dt_s = (double)dt_ns / 1e9;
	bool use[256], wuse[256];
	char label[128], wlabel[128];
	top_zone_set(e, false, use, label, sizeof(label));
	top_zone_set(e, true, wuse, wlabel, sizeof(wlabel));

	size_t ngpus = 0, nsim = 0;
	for (size_t i = 0; i < e->n_zones; i++) {
		ngpus += zone_is_gpu(&e->zones[i]);
		nsim += zone_is_simulated(&e->zones[i]);
	}
	size_t nmax = e->n_procs + e->n_containers + e->n_pods + e->n_vms + ngpus;
	struct top_row *rows = calloc(nmax ? nmax : 1, sizeof(*rows));
	if (!rows) {
		put_line(width, "(out of memory)");
		return;
	}
	struct top_table tt[5] = {
	    {"PROCESSES", rows, 0, 0, TT_PROCS}, {"CONTAINERS", NULL, 0, 0, TT_GROUPS},
	    {"PODS", NULL, 0, 0, TT_GROUPS},	 {"VMS", NULL, 0, 0, TT_GROUPS},
	    {"GPUS", NULL, 0, 0, TT_GPUS},
	};
	struct top_row *r = rows;
	for (size_t i = 0; i < e->n_procs; i++) {
		const struct wb_est_proc *p = &e->procs[i];
		r[i] = (struct top_row){
		    .w = top_watts(p->energy_uj, p->n_energy_uj, wuse, e->n_zones, dt_ns),
		    .cpu_pct = (double)p->cpu_ns * 100.0 / (double)dt_ns,
		    .label = p->comm,
		    .pid = p->pid,
		};
		snprintf(r[i].extra, sizeof(r[i].extra), "%.12s%s", p->container_id,
			 p->exited ? (p->container_id[0] ? " (exited)" : "(exited)") : "");
	}
	qsort(r, e->n_procs, sizeof(*r), row_cmp);
	tt[0].n = e->n_procs;
	r += e->n_procs;
	const struct wb_est_group *groups[3] = {e->containers, e->pods, e->vms};
	size_t ngroup[3] = {e->n_containers, e->n_pods, e->n_vms};
	for (size_t g = 0; g < 3; g++) {
		tt[1 + g].rows = r;
		tt[1 + g].n = group_rows(groups[g], ngroup[g], wuse, e->n_zones, dt_ns, r);
		r += ngroup[g];
	}
	tt[4].rows = r;
	for (size_t i = 0; i < e->n_zones; i++) {
		const struct wb_est_zone *z = &e->zones[i];
		if (!zone_is_gpu(z))
			continue;
		*r = (struct top_row){
		    .w = (double)z->energy_uj * 1e3 / (double)dt_ns,
		    .active_w = (double)z->active_uj * 1e3 / (double)dt_ns,
		    .label = z->name,
		};
		snprintf(r->extra, sizeof(r->extra), "%s%s%.40s%s", z->model,
			 z->uuid[0] ? " (" : "", z->uuid, z->uuid[0] ? ")" : "");
		r++;
		tt[4].n++;
	}

	/* Rows per table: what --rows says (10 with --plain), or what fits the terminal. */
	size_t zone_lines = (e->n_zones - ngpus) + (e->n_zones > 1);
	bool sep = true;
	if (t->o.rows > 0 || height <= 0) {
		size_t limit = t->o.rows > 0 ? (size_t)t->o.rows : 10;
		for (size_t i = 0; i < 5; i++)
			tt[i].shown = tt[i].n < limit ? tt[i].n : limit;
	} else {
		/* the header, the zone table's header and its rows are always drawn; the last line
		 * of the terminal stays empty (a newline there would scroll the header away) */
		int avail = height - 1 - 2 - (int)zone_lines;
		sep = top_share(tt, 5, avail);
	}

	time_t sec = (time_t)(e->t1 / WB_NS_PER_SEC);
	struct tm tm;
	char when[32] = "?";
	if (localtime_r(&sec, &tm))
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
	put_line(width, "host %s  %sslot ending %s (%.3f s)  %s%s%s  CPU %.1f%% of %u", e->env.host,
		 nsim ? "SIMULATED meter  " : "", when, dt_s, e->mode, e->model[0] ? " " : "",
		 e->model, e->cpu_usage_ratio * 100.0, (unsigned)e->ncpu);
	if (sep)
		put_line(width, "%s", "");
	if (t->o.plain)
		put_line(width, "%-12s %9s %9s %9s %9s", "ZONE", "TOTAL W", "ACTIVE W", "IDLE W",
			 "UNATTR W");
	else
		put_line(width, "%-12s %9s %9s %9s %9s  %s", "ZONE", "TOTAL W", "ACTIVE W",
			 "IDLE W", "UNATTR W", "(? keys)");
	double tot = 0, act = 0, idle = 0, un = 0;
	for (size_t i = 0; i < e->n_zones; i++) {
		const struct wb_est_zone *z = &e->zones[i];
		double w = (double)z->energy_uj * 1e3 / (double)dt_ns,
		       a = (double)z->active_uj * 1e3 / (double)dt_ns,
		       id = (double)z->idle_uj * 1e3 / (double)dt_ns,
		       u = (double)z->unattributed_uj * 1e3 / (double)dt_ns;
		if (i < 256 && use[i]) {
			tot += w;
			act += a;
			idle += id;
			un += u;
		}
		if (zone_is_gpu(z))
			continue; /* in the GPU table */
		put_line(width, "%-12s %9.3f %9.3f %9.3f %9.3f%s", z->name, w, a, id, u,
			 zone_is_simulated(z) ? "  simulated" : "");
	}
	if (e->n_zones > 1)
		put_line(width, "%-12s %9.3f %9.3f %9.3f %9.3f  (%s)", "node", tot, act, idle, un,
			 label);

	for (size_t i = 0; i < 5; i++)
		table_draw(&tt[i], sep, width);
	free(rows);
}

static int host_cmp(const void *a, const void *b)
{
	return strcmp(((const struct top_host *)a)->host, ((const struct top_host *)b)->host);
}

/* The keys, drawn in place of the frames while `?` holds. */
static void render_help(int width)
{
	put_line(width, "wattbus top: keys");
	put_line(width, "%s", "");
	put_line(width, "  q    quit");
	put_line(width, "  ?    this list; any key goes back to the frames");
	put_line(width, "%s", "");
	put_line(width, "The header and the zones are always drawn; the tables (processes,");
	put_line(width, "containers, pods, VMs, GPUs) share the lines left, each with a");
	put_line(width, "\"+N more\" line for the rows that do not fit (--rows N: N each).");
	put_line(width, "A cut name keeps its head and tail: head~tail.");
}

static void render(struct top *t, bool help)
{
	int width = top_width(&t->o);
	if (width < TOP_MIN_WIDTH)
		width = TOP_MIN_WIDTH;
	int height = t->o.plain ? 0 : top_height();
	if (!t->o.plain)
		fputs("\033[H\033[2J", stdout); /* home, clear: all a plain terminal needs */
	if (help) {
		render_help(width);
		fflush(stdout);
		return;
	}
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
	bool help;   /* `?` shows the keys until the next key */
	bool redraw; /* a key changed what is shown */
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
		for (ssize_t i = 0; i < n; i++) {
			k->quit |= buf[i] == 'q' || buf[i] == 'Q';
			bool help = buf[i] == '?' ? !k->help : false;
			k->redraw |= help != k->help;
			k->help = help;
		}
	}
	return (it[0].revents & ZMQ_POLLIN) != 0;
}

#define OFF(m) offsetof(struct top_opts, m)
static const struct cli_flag top_flags[] = {
    CLI_OPERAND("ENDPOINT",
		"estimd's publisher (default: estimd.sock in $WATTBUS_RUNTIME_DIR, else in\n"
		"run/ beside this program (make run's build/run/) or the default\n"
		"runtime dir: /run/wattbus as root, $XDG_RUNTIME_DIR/wattbus, /tmp/wattbus-UID)"),
    CLI_SWITCH("once", '1', OFF(once), "draw one frame and exit (--count 1)"),
    CLI_INT("count", 'n', OFF(count), NULL, 1, INT64_MAX, "N", "exit after N frames"),
    CLI_SWITCH("plain", 'p', OFF(plain), "no escape codes: frames one after another, for scripts"),
    CLI_DURATION("timeout", 't', OFF(timeout_ns), NULL, 0, 0, "D",
		 "give up (exit 1) when no estimate arrives for this long (e.g. 10s)"),
    CLI_STR("host", 'H', OFF(host), NULL, "HOST", "only this host's estimates"),
    CLI_INT("rows", 'r', OFF(rows), NULL, 1, 100000, "N",
	    "rows per table (default: fit the terminal; 10 with --plain)"),
    CLI_INT("width", 'w', OFF(width), NULL, 1, 100000, "N",
	    "line width (default: $COLUMNS, the terminal's, or 80)"),
};
static const struct cli_verb top_verb = {CLI_VERB("top", top_flags, struct top_opts, 0, 1),
					 .synopsis = "[OPTIONS] [ENDPOINT]",
					 .notes = "  q quits; ? shows the keys\n"};

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
	struct top *t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "wattbus top: out of memory\n");
		return 1;
	}
	int first, rc = cli_parse(&top_verb, argc, argv, &t->o, &first);
	if (rc >= 0) {
		free(t);
		return rc;
	}
	rc = 0;
	if (t->o.once)
		t->o.count = 1;
	char ep[PATH_MAX + 32], missing[PATH_MAX];
	if (first < argc) {
		snprintf(ep, sizeof(ep), "%s", argv[first]);
	} else if (top_find(t, ep, sizeof(ep)) < 0) {
		free(t);
		return cli_interrupted() ? 0 : 1;
	}
	bool absent = cli_ipc_missing(ep, missing, sizeof(missing));
	if (absent && t->o.plain)
		cli_say_missing("top", missing, 0);
	if (t->o.plain && !t->o.rows)
		t->o.rows = 10;

	char prefix[WB_TOPIC_MAX];
	snprintf(prefix, sizeof(prefix), "estimate/%s", t->o.host ? t->o.host : "");
	const char *prefixes[] = {prefix};
	struct wb_sub *sub = cli_sub_open(ep, prefixes, 1, NULL);
	if (!sub) {
		free(t);
		return 1;
	}
	if (!t->o.plain) {
		int width = top_width(&t->o);
		fputs("\033[H\033[2J", stdout);
		put_line(width, "wattbus top: waiting for estimates on %s", ep);
		if (absent)
			put_line(width, "(nothing listens there yet)");
		put_line(width, "q quits, ? keys");
		fflush(stdout);
	}
	struct top_keys keys;
	top_keys_open(&keys, !t->o.plain);
	long long frames = 0;
	uint64_t last = wb_mono_ns();
	while (!cli_interrupted() && !keys.quit && (!t->o.count || frames < t->o.count)) {
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
		int queued = top_wait(sub, &keys, 200);
		if (keys.redraw) {
			keys.redraw = false;
			if (keys.help || t->nhosts)
				render(t, keys.help);
		}
		if (!queued)
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
		render(t, keys.help);
		frames++;
	}
	top_keys_close(&keys);
	for (size_t i = 0; i < t->nhosts; i++)
		wb_msg_clear(&t->hosts[i].msg);
	wb_sub_destroy(&sub);
	free(t);
	return rc;
}
