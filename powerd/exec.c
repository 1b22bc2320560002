/*
 * Readings printed by an external command, the way to support a meter no
 * built-in source knows. Sample mode runs the command at every sample, each run a
 * job (lib/job.h) off the loop that the sample waits for (pd_source.busy) and a stop
 * cancels, killing the command; stream mode keeps it running and takes lines as
 * they come. The line format is in docs/powerd.md ("exec line format") and
 * exec_parse_line() below.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bus.h"
#include "clock.h"
#include "job.h"
#include "powerd.h"

#define EXEC_OUT_MAX 65536 /* output of one sample-mode run */
#define EXEC_LINE_MAX 512
#define EXEC_RESTART_NS                                                                            \
	(1000000000ull) /* stream mode: wait this long before restarting the command */

extern char **environ;

/* Its keys in [powerd]. */
struct exec_conf {
	char *exec;
	char *exec_mode;
	uint64_t exec_timeout_ns;
};

/* Its stat counters. */
struct exec_counts {
	uint64_t exec_failures; /* runs that failed or timed out, stream commands that ended */
	/* stream lines without @NS that shared one read() with an earlier line of their zone */
	uint64_t exec_burst_lines;
};
_Static_assert(sizeof(struct exec_counts) <= PD_SOURCE_COUNTERS_MAX * sizeof(uint64_t),
	       "exec's counters do not fit");

static struct exec_counts *counts(struct pd_set *set)
{
	return pd_source_counts(set, &exec_source);
}

struct exec_zone {
	char name[64]; /* as the command prints it */
	size_t zi;     /* index in the set */
	enum pd_exec_unit unit;
	uint64_t read_seq; /* stream mode: the read() of its last line without @NS */
};

/* A sample-mode run: what it works on (the job owns it) and what it gives back. */
struct exec_run {
	char *cmd;
	uint64_t t_ns, mono_ns; /* the sample it is for */
	uint64_t interval_ns, timeout_ns;
	bool startup; /* the start-up run: its readings are baselines */
	int efd;      /* a dup of the source's eventfd, written once the result is whole */
	/* the result */
	bool ok;
	char *out; /* the output, NUL-terminated (ok) */
	char why[256];
	uint64_t took_ns;
};

struct pd_exec {
	char *cmd;
	bool stream;
	uint64_t timeout_ns;
	struct exec_zone *zones;
	size_t nzones;
	/* sample mode: the run in flight, the sample it is for, and the descriptor (an eventfd)
	 * the loop watches for its end */
	struct wb_job *job;
	uint64_t run_t_ns, sample_t_ns;
	bool retry;
	int efd;
	/* stream mode: warn when no line has come by then (exec_timeout); 0: warned or came */
	uint64_t first_by_mono_ns;
	/* stream mode */
	pid_t pid;
	bool running;
	/*
	 * The descriptor the event loop watches, the same number for the life of the
	 * source: the command's stdout while it runs, an idle pipe (never readable,
	 * we hold its write end in idle_w) while it is waiting to be restarted.
	 */
	int fd;
	int idle_w;
	char buf[EXEC_LINE_MAX];
	size_t len;
	bool overlong;
	uint64_t restart_at_ns;
	uint64_t read_seq; /* stream mode: read() calls so far (from 1) */
	struct wb_ratelimit rl, rl_burst;
};

static struct pd_exec *exec_of(struct pd_set *set)
{
	return *pd_set_state(set, &exec_source);
}

static void exec_destroy(struct pd_set *set);

static const char *const exec_kinds[] = {"package", "core",	"uncore", "dram",
					 "psys",    "platform", "gpu",	  "other"};

static bool kind_valid(const char *k, size_t len)
{
	for (size_t i = 0; i < sizeof(exec_kinds) / sizeof(exec_kinds[0]); i++)
		if (strlen(exec_kinds[i]) == len && !strncmp(exec_kinds[i], k, len))
			return true;
	return false;
}

/* Kind from the zone name's first word ("package-0" -> package), else other. */
static const char *kind_from_name(const char *name)
{
	for (size_t i = 0; i < sizeof(exec_kinds) / sizeof(exec_kinds[0]); i++) {
		size_t len = strlen(exec_kinds[i]);
		if (!strncmp(name, exec_kinds[i], len) &&
		    (name[len] == '\0' || name[len] == '-' || name[len] == '_'))
			return exec_kinds[i];
	}
	return "other";
}

/* Next blank-separated token of *s; returns its length (0 at the end). */
static size_t token(const char **s, const char **tok)
{
	while (**s == ' ' || **s == '\t')
		(*s)++;
	*tok = *s;
	while (**s && **s != ' ' && **s != '\t')
		(*s)++;
	return (size_t)(*s - *tok);
}

static int parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	if (len == 0 || len > 20)
		return -1;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9 || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* Watts with up to 6 decimals -> microwatts, exactly. */
static int parse_watts(const char *s, size_t len, uint64_t *uw)
{
	const char *dot = memchr(s, '.', len);
	size_t ilen = dot ? (size_t)(dot - s) : len;
	size_t flen = dot ? len - ilen - 1 : 0;
	uint64_t w, frac = 0;
	if (parse_uint(s, ilen, 1000000000ull, &w) < 0 || (dot && (flen == 0 || flen > 6)))
		return -1;
	if (flen && parse_uint(dot + 1, flen, 999999, &frac) < 0)
		return -1;
	for (size_t i = flen; i < 6; i++)
		frac *= 10;
	*uw = w * 1000000ull + frac;
	return 0;
}

int exec_parse_line(const char *line, struct pd_exec_line *out, char *err, size_t errlen)
{
	const char *s = line, *tok;
	size_t len = token(&s, &tok);
	if (len == 0 || tok[0] == '#' || (len == 1 && tok[0] == '\r'))
		return 0;
	memset(out, 0, sizeof(*out));
	if (len >= sizeof(out->zone)) {
		snprintf(err, errlen, "zone name longer than %zu characters",
			 sizeof(out->zone) - 1);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char ch = tok[i];
		if (!isalnum((unsigned char)ch) && ch != '-' && ch != '_' && ch != '.' &&
		    ch != ':') {
			snprintf(err, errlen,
				 "zone name \"%.*s\": only letters, digits and -_.: allowed",
				 (int)len, tok);
			return -1;
		}
	}
	memcpy(out->zone, tok, len);
	const char *vtok, *utok;
	size_t vlen = token(&s, &vtok);
	size_t ulen = token(&s, &utok);
	if (ulen && utok[ulen - 1] == '\r')
		ulen--;
	if (vlen == 0 || ulen == 0) {
		snprintf(err, errlen, "zone %s: expected \"ZONE VALUE uj|w\"", out->zone);
		return -1;
	}
	if (ulen == 2 && !strncasecmp(utok, "uj", 2)) {
		out->unit = PD_UNIT_UJ;
		if (parse_uint(vtok, vlen, INT64_MAX, &out->value) < 0) {
			snprintf(err, errlen,
				 "zone %s: \"%.*s\" is not a whole number of microjoules",
				 out->zone, (int)vlen, vtok);
			return -1;
		}
	} else if (ulen == 1 && (utok[0] == 'w' || utok[0] == 'W')) {
		out->unit = PD_UNIT_W;
		if (parse_watts(vtok, vlen, &out->value) < 0) {
			snprintf(err, errlen,
				 "zone %s: \"%.*s\" is not a number of watts (up to 6 decimals)",
				 out->zone, (int)vlen, vtok);
			return -1;
		}
	} else {
		snprintf(err, errlen, "zone %s: unit \"%.*s\" is neither uj nor w", out->zone,
			 (int)ulen, utok);
		return -1;
	}
	snprintf(out->kind, sizeof(out->kind), "%s", kind_from_name(out->zone));
	const char *otok;
	size_t olen;
	while ((olen = token(&s, &otok))) {
		if (otok[olen - 1] == '\r' && !--olen)
			break;
		if (olen > 5 && !strncmp(otok, "kind=", 5) && kind_valid(otok + 5, olen - 5)) {
			snprintf(out->kind, sizeof(out->kind), "%.*s", (int)(olen - 5), otok + 5);
		} else if (olen > 1 && otok[0] == '@' &&
			   parse_uint(otok + 1, olen - 1, INT64_MAX, &out->t_ns) == 0 &&
			   out->t_ns) {
			/* taken: the meter's own time of the reading */
		} else if (olen > 6 && !strncmp(otok, "range=", 6) && out->unit == PD_UNIT_UJ &&
			   parse_uint(otok + 6, olen - 6, INT64_MAX - 1, &out->range_uj) == 0 &&
			   out->range_uj) {
			/* taken */
		} else {
			snprintf(
			    err, errlen,
			    "zone %s: bad option \"%.*s\" (kind=KIND, @NS, or range=UJ with uj)",
			    out->zone, (int)olen, otok);
			return -1;
		}
	}
	return 1;
}

static unsigned index_from_name(const char *name)
{
	const char *dash = strrchr(name, '-');
	if (!dash || !dash[1])
		return 0;
	uint64_t v;
	return parse_uint(dash + 1, strlen(dash + 1), 65535, &v) == 0 ? (unsigned)v : 0;
}

static struct exec_zone *exec_zone_find(struct pd_exec *ex, const char *name)
{
	for (size_t i = 0; i < ex->nzones; i++)
		if (!strcmp(ex->zones[i].name, name))
			return &ex->zones[i];
	return NULL;
}

static struct exec_zone *exec_zone_add(struct pd_set *set, struct pd_exec *ex,
				       const struct pd_exec_line *l)
{
	if (ex->nzones >= PD_ZONES_MAX)
		return NULL;
	struct pd_zone z;
	pd_zone_init(&z, &exec_source, l->kind, index_from_name(l->zone));
	snprintf(z.name, sizeof(z.name), "%s", l->zone);
	snprintf(z.path, sizeof(z.path), "%.255s", ex->cmd);
	uint64_t max_uw = (uint64_t)(set->opts->max_power_w * 1e6);
	if (l->unit == PD_UNIT_W) {
		z.is_power = true;
		integ_init(&z.integ, max_uw, integ_bridge_ns(set->opts->interval_ns));
	} else {
		counter_init(&z.ctr, l->range_uj ? l->range_uj + 1 : 0, 1, 1, max_uw);
	}
	int zi = pd_set_add(set, &z);
	if (zi < 0)
		return NULL;
	if (!ex->zones) {
		ex->zones = calloc(PD_ZONES_MAX, sizeof(*ex->zones));
		if (!ex->zones)
			return NULL;
	}
	struct exec_zone *ez = &ex->zones[ex->nzones++];
	snprintf(ez->name, sizeof(ez->name), "%s", l->zone);
	ez->zi = (size_t)zi;
	ez->unit = l->unit;
	log_info("exec: zone %s (%s, %s)", set->zones[zi].name, l->kind,
		 l->unit == PD_UNIT_W ? "watts, integrated" : "microjoule counter");
	return ez;
}

/* Parse and account one line read at (t_ns, mono_ns); seq: the stream read() it came in (0: a
 * sample-mode run). */
static void exec_line(struct pd_set *set, struct pd_exec *ex, const char *line, uint64_t t_ns,
		      uint64_t mono_ns, uint64_t seq)
{
	struct pd_exec_line l;
	char err[256];
	int rc = exec_parse_line(line, &l, err, sizeof(err));
	if (rc == 0)
		return;
	if (rc < 0) {
		set->counts.parse_errors++;
		log_rl(&ex->rl, WB_LOG_WARN, "exec: %s: %s; line ignored", ex->cmd, err);
		return;
	}
	struct exec_zone *ez = exec_zone_find(ex, l.zone);
	if (!ez && !(ez = exec_zone_add(set, ex, &l)))
		return;
	if (ez->unit != l.unit) {
		set->counts.parse_errors++;
		log_rl(&ex->rl, WB_LOG_WARN, "exec: %s: zone %s changed its unit; line ignored",
		       ex->cmd, l.zone);
		return;
	}
	if (l.t_ns && l.t_ns < t_ns) {
		/* The meter's time: the monotonic clock is moved back by as much, so that lines
		 * that came in one burst keep their spacing. */
		uint64_t back_ns = t_ns - l.t_ns;
		if (back_ns >= mono_ns) {
			set->counts.parse_errors++;
			log_rl(&ex->rl, WB_LOG_WARN,
			       "exec: %s: zone %s: @%llu is before this host booted; line ignored",
			       ex->cmd, l.zone, (unsigned long long)l.t_ns);
			return;
		}
		t_ns = l.t_ns;
		mono_ns -= back_ns;
	} else if (!l.t_ns && seq) {
		if (ez->read_seq == seq) {
			/* Both lines get the time of the read: the later ones are lost (watts) or
			 * judged on no time (counters). The meter buffers its output. */
			counts(set)->exec_burst_lines++;
			log_rl(
			    &ex->rl_burst, WB_LOG_WARN,
			    "exec: '%s': several lines for zone %s in one read and no @NS timestamps: the meter buffers its output, so all but the first lose their time; make it line-buffered (python3 -u, stdbuf -oL) or end each line with @<ns since the epoch>",
			    ex->cmd, l.zone);
		}
		ez->read_seq = seq;
	}
	struct pd_zone *z = &set->zones[ez->zi];
	if (pd_verdict_added(pd_zone_account(set, z, l.value, t_ns, mono_ns)))
		z->updated = true;
}

/* Start /bin/sh -c cmd with its stdout on a pipe (*rfd). Runs on a job's thread too: says what
 * failed in err rather than logging. */
static pid_t exec_spawn(const char *cmd, uint64_t t_ns, uint64_t interval_ns, int *rfd, char *err,
			size_t errlen)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawnattr_init(&attr);
	/* its own process group, so that a timeout also stops what the shell started */
	posix_spawnattr_setpgroup(&attr, 0);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);

	size_t nenv = 0;
	while (environ[nenv])
		nenv++;
	char **env = calloc(nenv + 3, sizeof(*env));
	char t_var[64], i_var[64];
	snprintf(t_var, sizeof(t_var), "WATTBUS_SAMPLE_T_NS=%llu", (unsigned long long)t_ns);
	snprintf(i_var, sizeof(i_var), "WATTBUS_INTERVAL_NS=%llu", (unsigned long long)interval_ns);
	pid_t pid = -1;
	snprintf(err, errlen, "out of memory");
	if (env) {
		size_t j = 0;
		for (size_t i = 0; i < nenv; i++)
			if (strncmp(environ[i], "WATTBUS_SAMPLE_T_NS=", 20) &&
			    strncmp(environ[i], "WATTBUS_INTERVAL_NS=", 20))
				env[j++] = environ[i];
		if (t_ns)
			env[j++] = t_var;
		env[j++] = i_var;
		char *argv[] = {"sh", "-c", (char *)cmd, NULL};
		int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, env);
		if (rc) {
			snprintf(err, errlen, "cannot start /bin/sh -c: %s", strerror(rc));
			pid = -1;
		}
		free(env);
	}
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	*rfd = p[0];
	return pid;
}

/* Stop the command's process group: SIGTERM, then SIGKILL if it lingers. Returns its wait status.
 */
static int exec_reap(pid_t pid)
{
	int status = 0;
	kill(-pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &status, WNOHANG) != 0)
			return status;
		usleep(5000);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, &status, 0);
	return status;
}

static void describe_status(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, size, "ended (status 0x%x)", status);
}

/*
 * Run the command once, collecting its output until it exits, the job's deadline (the run's
 * timeout) or its cancel (a stop). Returns 0 with r->out (malloc'd, NUL-terminated) or -1 with
 * r->why filled. Runs on the job's thread.
 */
static int exec_run(struct wb_job *job, struct exec_run *r)
{
	int fd;
	pid_t pid = exec_spawn(r->cmd, r->t_ns, r->interval_ns, &fd, r->why, sizeof(r->why));
	if (pid < 0)
		return -1;
	char *buf = malloc(EXEC_OUT_MAX + 1);
	size_t len = 0;
	bool stopped = false;
	int status = 0;
	for (;;) {
		int rc = wb_job_wait_fd(job, fd, POLLIN, 0);
		if (rc == 0) {
			stopped = true;
			break;
		}
		if (rc < 0)
			break;
		char tmp[4096];
		ssize_t n = read(fd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t take = buf && len + (size_t)n <= EXEC_OUT_MAX ? (size_t)n : 0;
		if (take) {
			memcpy(buf + len, tmp, take);
			len += take;
		}
	}
	close(fd);
	/* After end of output, give it until the deadline to exit. */
	pid_t w = 0;
	while (!stopped && (w = waitpid(pid, &status, WNOHANG)) == 0) {
		if (wb_job_stopping(job)) {
			stopped = true;
			break;
		}
		usleep(200);
	}
	if (stopped) {
		kill(-pid, SIGKILL);
		waitpid(pid, &status, 0);
		if (wb_job_cancelled(job))
			snprintf(r->why, sizeof(r->why), "cancelled: powerd is stopping");
		else
			snprintf(r->why, sizeof(r->why), "no result within exec_timeout %.0f ms",
				 (double)r->timeout_ns / 1e6);
		free(buf);
		return -1;
	}
	if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !buf) {
		char st[64];
		describe_status(status, st, sizeof(st));
		snprintf(r->why, sizeof(r->why), "%s", buf ? st : "out of memory");
		free(buf);
		return -1;
	}
	buf[len] = '\0';
	r->out = buf;
	return 0;
}

static void exec_run_work(struct wb_job *job, void *arg)
{
	struct exec_run *r = arg;
	uint64_t start = wb_mono_ns();
	r->ok = exec_run(job, r) == 0;
	r->took_ns = wb_mono_ns() - start;
	uint64_t one = 1;
	if (write(r->efd, &one, sizeof(one)) < 0) {
		/* the eventfd cannot overflow at one write per run */
	}
}

static void exec_run_free(void *arg)
{
	struct exec_run *r = arg;
	if (r->efd >= 0)
		close(r->efd);
	free(r->out);
	free(r->cmd);
	free(r);
}

/* Start a run for the sample at (t_ns, mono_ns) with timeout_ns. Returns 0, or -1 with why. */
static int exec_run_start(struct pd_set *set, struct pd_exec *ex, uint64_t t_ns, uint64_t mono_ns,
			  uint64_t timeout_ns, bool startup, char *why, size_t whylen)
{
	struct exec_run *r = calloc(1, sizeof(*r));
	if (!r || !(r->cmd = strdup(ex->cmd)) ||
	    (r->efd = fcntl(ex->efd, F_DUPFD_CLOEXEC, 0)) < 0) {
		snprintf(why, whylen, "cannot start a run: %s", strerror(errno));
		if (r)
			free(r->cmd);
		free(r);
		return -1;
	}
	r->t_ns = t_ns;
	r->mono_ns = mono_ns;
	r->interval_ns = set->opts->interval_ns;
	r->timeout_ns = timeout_ns;
	r->startup = startup;
	char what[128];
	snprintf(what, sizeof(what), "exec run of '%.100s'", ex->cmd);
	ex->job = wb_job_start(what, timeout_ns, exec_run_work, r, exec_run_free, why, whylen);
	if (!ex->job)
		return -1;
	ex->run_t_ns = t_ns;
	return 0;
}

/* Account every line of a sample-mode run. */
static void exec_lines(struct pd_set *set, struct pd_exec *ex, char *text, uint64_t t_ns,
		       uint64_t mono_ns)
{
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		exec_line(set, ex, line, t_ns, mono_ns, 0);
}

/* Put rfd (owned) under the stable descriptor number ex->fd. */
static int exec_stream_install(struct pd_exec *ex, int rfd)
{
	if (ex->fd < 0) {
		ex->fd = rfd;
		return 0;
	}
	int rc = dup3(rfd, ex->fd, O_CLOEXEC);
	if (rc < 0)
		log_warn("exec: dup3");
	close(rfd);
	return rc < 0 ? -1 : 0;
}

static void exec_stream_idle(struct pd_exec *ex)
{
	int p[2];
	ex->running = false;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_warn("exec: pipe");
		return;
	}
	if (exec_stream_install(ex, p[0]) < 0) {
		close(p[1]);
		return;
	}
	if (ex->idle_w >= 0)
		close(ex->idle_w);
	ex->idle_w = p[1];
}

static int exec_stream_start(struct pd_exec *ex, uint64_t interval_ns)
{
	int fd;
	char err[256];
	pid_t pid = exec_spawn(ex->cmd, 0, interval_ns, &fd, err, sizeof(err));
	if (pid < 0) {
		log_warnx("exec: '%s': %s", ex->cmd, err);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (exec_stream_install(ex, fd) < 0) {
		exec_reap(pid);
		return -1;
	}
	if (ex->idle_w >= 0) {
		close(ex->idle_w);
		ex->idle_w = -1;
	}
	ex->pid = pid;
	ex->running = true;
	ex->len = 0;
	ex->overlong = false;
	return 0;
}

/*
 * The start-up run is done: its readings name the zones and are their baselines. Returns the
 * zones found, or 0 with why (what the command did).
 */
static int exec_startup_done(struct pd_set *set, struct pd_exec *ex, bool ok, char *out,
			     const char *err, uint64_t took_ns, char *why, size_t whylen)
{
	if (ok)
		exec_lines(set, ex, out, wb_now_ns(), wb_mono_ns());
	if (ok && took_ns > ex->timeout_ns)
		log_warnx(
		    "exec: '%s': the start-up run took %.0f ms, and each sample's run is cut at %.0f ms (exec_timeout, at most the interval): make the command faster or the interval longer",
		    ex->cmd, (double)took_ns / 1e6, (double)ex->timeout_ns / 1e6);
	for (size_t i = 0; i < ex->nzones; i++)
		set->zones[ex->zones[i].zi].updated = false; /* baselines, published from the next
								 sample */
	if (ex->nzones)
		return (int)ex->nzones;
	snprintf(why, whylen, ok ? "'%s' %s" : "'%s': %s", ex->cmd,
		 ok ? "printed no valid reading (format: ZONE VALUE uj|w)" : err);
	return 0;
}

/* A run has ended: account its lines (a sample's) or take its zones (the start-up run's). */
static void exec_collect(struct pd_set *set, struct pd_exec *ex)
{
	struct exec_run *r = wb_job_arg(ex->job);
	bool ok = r->ok, startup = r->startup;
	char *out = r->out, err[sizeof(r->why)];
	r->out = NULL;
	memcpy(err, r->why, sizeof(err));
	uint64_t t_ns = r->t_ns, mono_ns = r->mono_ns, took_ns = r->took_ns;
	/* the result is whole once the eventfd is written; the job may still be returning */
	wb_job_release(&ex->job);
	if (startup) {
		char why[PD_WHY_MAX];
		if (!exec_startup_done(set, ex, ok, out, err, took_ns, why, sizeof(why))) {
			/* A meter that is not ready yet (a BMC still starting, a driver loaded
			 * later) is not a wrong configuration: its zones come with its first good
			 * run. */
			counts(set)->exec_failures += !ok;
			log_warnx(
			    "exec: %s; it runs again at every sample, and its zones come with its first good run",
			    why);
		}
	} else if (!ok) {
		counts(set)->exec_failures++;
		log_rl(&ex->rl, WB_LOG_WARN, "exec: '%s': %s; %s", ex->cmd, err,
		       ex->nzones ? "its zones skip this sample" : "no zones yet");
	} else {
		exec_lines(set, ex, out, t_ns, mono_ns);
		if (!ex->nzones)
			log_rl(
			    &ex->rl, WB_LOG_WARN,
			    "exec: '%s' printed no valid reading (format: ZONE VALUE uj|w); no zones yet",
			    ex->cmd);
	}
	free(out);
}

/* Sample mode: the eventfd says a run has ended. */
static int exec_run_readable(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	uint64_t n;
	if (!ex || read(ex->efd, &n, sizeof(n)) != sizeof(n) || !ex->job)
		return 0;
	exec_collect(set, ex);
	return 0;
}

int exec_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	const struct exec_conf *conf = pd_source_conf(opts, &exec_source);
	if (!conf->exec || !conf->exec[0]) {
		snprintf(why, whylen, "no command configured (exec = COMMAND)");
		return 0;
	}
	struct pd_exec *ex = calloc(1, sizeof(*ex));
	if (!ex || !(ex->cmd = strdup(conf->exec))) {
		free(ex);
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	ex->stream = !strcmp(conf->exec_mode, "stream");
	ex->retry = opts->retry;
	ex->fd = -1;
	ex->idle_w = -1;
	ex->efd = -1;
	ex->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	ex->rl_burst = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	ex->timeout_ns = conf->exec_timeout_ns;
	if (!ex->stream && ex->timeout_ns > opts->interval_ns)
		ex->timeout_ns = opts->interval_ns; /* a run must end before the next sample */
	*pd_set_state(set, &exec_source) = ex;
	if (!ex->stream) {
		/*
		 * Learn the zones from one run; its readings become the baselines. No sample waits
		 * for this run, so it has the whole exec_timeout: a first run slowed by a cold
		 * cache or a loaded machine does not cost the meter. powerd (retry) goes on and
		 * takes the zones when the run ends, on its loop; the CLI waits for the verdict.
		 */
		if ((ex->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
			snprintf(why, whylen, "eventfd: %s", strerror(errno));
			exec_destroy(set);
			return 0;
		}
		if (exec_run_start(set, ex, wb_now_ns(), wb_mono_ns(), conf->exec_timeout_ns, true,
				   why, whylen) < 0) {
			exec_destroy(set);
			return 0;
		}
		set->used |= 1u << pd_source_index(&exec_source);
		if (ex->retry)
			return 1;
		wb_job_wait(ex->job, conf->exec_timeout_ns + WB_JOB_STOP_NS);
		struct exec_run *r = wb_job_arg(ex->job);
		bool done = wb_job_done(ex->job), ok = done && r->ok;
		int n = exec_startup_done(set, ex, ok, r->out, done ? r->why : "did not end",
					  done ? r->took_ns : 0, why, whylen);
		uint64_t drain;
		if (read(ex->efd, &drain, sizeof(drain)) < 0) {
			/* nothing to drain when the run did not end */
		}
		wb_job_release(&ex->job);
		if (!n)
			exec_destroy(set);
		return n;
	}
	if (exec_stream_start(ex, opts->interval_ns) < 0) {
		snprintf(why, whylen, "'%s': cannot start the command", ex->cmd);
		exec_destroy(set);
		return 0;
	}
	set->used |= 1u << pd_source_index(&exec_source);
	if (ex->retry) {
		/* powerd: zones come with the first lines; tend warns if none came by exec_timeout
		 */
		ex->first_by_mono_ns = wb_mono_ns() + conf->exec_timeout_ns;
		return 1;
	}
	/* The CLI: wait up to exec_timeout for the first readings (later zones are added as they
	 * appear), for its verdict. */
	uint64_t deadline = wb_mono_ns() + conf->exec_timeout_ns;
	while (ex->nzones == 0 && ex->running && wb_mono_ns() < deadline) {
		struct pollfd pfd = {.fd = ex->fd, .events = POLLIN};
		poll(&pfd, 1, (int)((deadline - wb_mono_ns()) / 1000000) + 1);
		if (exec_stream_read(set) < 0)
			break;
	}
	if (!ex->running && ex->nzones == 0) {
		snprintf(why, whylen, "'%s' ended before printing a reading", ex->cmd);
		exec_destroy(set);
		return 0;
	}
	if (ex->nzones == 0)
		log_warnx(
		    "exec: '%s' printed no reading within %.0f ms; zones will appear with its first lines",
		    ex->cmd, (double)conf->exec_timeout_ns / 1e6);
	for (size_t i = 0; i < ex->nzones; i++)
		set->zones[ex->zones[i].zi].updated = false;
	return ex->nzones ? (int)ex->nzones : 1;
}

/* Sample mode: start the sample's run; the sample waits for it (exec_busy). */
static void exec_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns)
{
	struct pd_exec *ex = exec_of(set);
	if (!ex || ex->stream)
		return;
	ex->sample_t_ns = t_ns;
	if (ex->job) {
		/* the start-up run, or the last sample's run at its deadline: no second one */
		log_debug("exec: '%s': a run is still going; none for this sample", ex->cmd);
		return;
	}
	char err[256];
	if (exec_run_start(set, ex, t_ns, mono_ns, ex->timeout_ns, false, err, sizeof(err)) < 0) {
		counts(set)->exec_failures++;
		log_rl(&ex->rl, WB_LOG_WARN, "exec: '%s': %s", ex->cmd, err);
	}
}

/* The sample's run has not ended yet. */
static bool exec_busy(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	return ex && ex->job && ex->run_t_ns == ex->sample_t_ns;
}

int exec_stream_fd(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	return ex && ex->stream ? ex->fd : -1;
}

/* The descriptor the loop watches, the same for the life of the source: the stream, or the
 * eventfd of sample mode's runs. */
static int exec_watch_fd(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	return !ex ? -1 : ex->stream ? ex->fd : ex->efd;
}

static int exec_on_readable(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	return ex && ex->stream ? exec_stream_read(set) : exec_run_readable(set);
}

bool exec_stream_running(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	return ex && ex->stream && ex->running;
}

int exec_stream_read(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	if (!ex || !ex->running)
		return -1;
	for (;;) {
		ssize_t n = read(ex->fd, ex->buf + ex->len, sizeof(ex->buf) - 1 - ex->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			char st[64];
			exec_stream_idle(ex);
			describe_status(exec_reap(ex->pid), st, sizeof(st));
			counts(set)->exec_failures++;
			log_rl(&ex->rl, WB_LOG_WARN, "exec: '%s' %s; restarting it in 1 s", ex->cmd,
			       st);
			ex->pid = 0;
			ex->restart_at_ns = wb_mono_ns() + EXEC_RESTART_NS;
			return -1;
		}
		uint64_t t_ns = wb_now_ns(), mono_ns = wb_mono_ns();
		ex->read_seq++;
		ex->len += (size_t)n;
		ex->buf[ex->len] = '\0';
		char *start = ex->buf, *nl;
		while ((nl = memchr(start, '\n', ex->len - (size_t)(start - ex->buf)))) {
			*nl = '\0';
			if (!ex->overlong)
				exec_line(set, ex, start, t_ns, mono_ns, ex->read_seq);
			ex->overlong = false;
			start = nl + 1;
		}
		size_t rest = ex->len - (size_t)(start - ex->buf);
		memmove(ex->buf, start, rest);
		ex->len = rest;
		if (ex->len == sizeof(ex->buf) - 1) {
			if (!ex->overlong) {
				set->counts.parse_errors++;
				log_rl(&ex->rl, WB_LOG_WARN,
				       "exec: '%s': line longer than %d bytes; ignored", ex->cmd,
				       EXEC_LINE_MAX - 1);
			}
			ex->overlong = true;
			ex->len = 0;
		}
	}
}

int exec_stream_tend(struct pd_set *set)
{
	struct pd_exec *ex = exec_of(set);
	if (ex && ex->first_by_mono_ns && (ex->nzones || wb_mono_ns() >= ex->first_by_mono_ns)) {
		if (!ex->nzones)
			log_warnx(
			    "exec: '%s' printed no reading within %.0f ms; zones will appear with its first lines",
			    ex->cmd, (double)ex->timeout_ns / 1e6);
		ex->first_by_mono_ns = 0;
	}
	if (!ex || !ex->stream || ex->running || wb_mono_ns() < ex->restart_at_ns)
		return 0;
	if (exec_stream_start(ex, set->opts->interval_ns) < 0) {
		ex->restart_at_ns = wb_mono_ns() + EXEC_RESTART_NS;
		return 0;
	}
	log_info("exec: restarted '%s'", ex->cmd);
	return 1;
}

static void exec_destroy(struct pd_set *set)
{
	void **slot = pd_set_state(set, &exec_source);
	struct pd_exec *ex = *slot;
	if (!ex)
		return;
	/* a run in flight is cancelled: its job kills the command and frees what it holds */
	wb_job_release(&ex->job);
	if (ex->efd >= 0)
		close(ex->efd);
	if (ex->fd >= 0)
		close(ex->fd);
	if (ex->idle_w >= 0)
		close(ex->idle_w);
	if (ex->pid > 0)
		exec_reap(ex->pid);
	free(ex->zones);
	free(ex->cmd);
	free(ex);
	*slot = NULL;
}

static int exec_check(const struct pd_opts *opts, char *err, size_t errlen)
{
	const struct exec_conf *conf = pd_source_conf(opts, &exec_source);
	if (!conf->exec || !conf->exec[0]) {
		snprintf(err, errlen, "source exec needs a command: exec = COMMAND");
		return -1;
	}
	return 0;
}

#define OFF(f) offsetof(struct exec_conf, f)
static const struct wb_conf_key exec_keys[] = {
    {"exec", WB_CONF_STR | WB_CONF_RESTART, OFF(exec), "", 0, 0, NULL,
     "command (run by /bin/sh -c) printing readings for the exec source: ZONE VALUE uj|w per line"},
    {"exec_mode", WB_CONF_ENUM | WB_CONF_RESTART, OFF(exec_mode), "sample", 0, 0, "sample|stream",
     "sample: run the command at every sample; stream: keep it running and take lines as they come"},
    {"exec_timeout", WB_CONF_DURATION, OFF(exec_timeout_ns), "1s", 1e6, 20e9, NULL,
     "sample mode: longest run (at most the interval; the first run at start has all of it); stream mode: warn when no reading came this long after the start; at most 20 s"},
};
#undef OFF

#define R(f) WB_STAT_ROW(struct exec_counts, f, #f)
static const struct wb_stat_row exec_stats[] = {R(exec_failures), R(exec_burst_lines)};
#undef R

const struct pd_source exec_source = {
    .name = "exec",
    .in_auto = false, /* never run a command that was not asked for */
    .keys = exec_keys,
    .nkeys = sizeof(exec_keys) / sizeof(exec_keys[0]),
    .conf_size = sizeof(struct exec_conf),
    .stats = exec_stats,
    .nstats = sizeof(exec_stats) / sizeof(exec_stats[0]),
    .power_from = "from the command's watts",
    .discover = exec_discover,
    .check = exec_check,
    .sample = exec_sample,
    .busy = exec_busy,
    .watch_fd = exec_watch_fd,
    .on_readable = exec_on_readable,
    .tend = exec_stream_tend,
    .destroy = exec_destroy,
};
