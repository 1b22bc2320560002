/*
 * powerd's exec source: the line format, a command run at every sample
 * (readings, failures, timeouts, garbage lines; each run a job), and a streaming command.
 */
#include <poll.h>
#include <signal.h>

#include "clock.h"
#include "job.h"
#include "test_powerd_fake.h"
#include "unit.h"

#define MS 1000000ull
#define T0 (1700000000ull * 1000000000ull)

static void test_parse(void)
{
	static const struct {
		const char *line;
		int rc;
		const char *zone, *kind;
		enum pd_exec_unit unit;
		uint64_t value, range;
	} t[] = {
	    {"package-0 123456 uj", 1, "package-0", "package", PD_UNIT_UJ, 123456, 0},
	    {"  dram-1\t7 UJ  ", 1, "dram-1", "dram", PD_UNIT_UJ, 7, 0},
	    {"gpu0 45.5 w kind=gpu", 1, "gpu0", "gpu", PD_UNIT_W, 45500000, 0},
	    {"platform 300.000001 W", 1, "platform", "platform", PD_UNIT_W, 300000001, 0},
	    {"psu:a 12 w", 1, "psu:a", "other", PD_UNIT_W, 12000000, 0},
	    {"pdu.outlet_3 0 w", 1, "pdu.outlet_3", "other", PD_UNIT_W, 0, 0},
	    {"x 999 uj range=1000", 1, "x", "other", PD_UNIT_UJ, 999, 1000},
	    {"x 5 uj\r", 1, "x", "other", PD_UNIT_UJ, 5, 0},
	    {"x 5 uj kind=dram\r", 1, "x", "dram", PD_UNIT_UJ, 5, 0},
	    {"# a comment", 0, NULL, NULL, 0, 0, 0},
	    {"", 0, NULL, NULL, 0, 0, 0},
	    {"   ", 0, NULL, NULL, 0, 0, 0},
	    {"x", -1, NULL, NULL, 0, 0, 0},
	    {"x 1", -1, NULL, NULL, 0, 0, 0},
	    {"x abc uj", -1, NULL, NULL, 0, 0, 0},
	    {"x 1.5 uj", -1, NULL, NULL, 0, 0, 0},
	    {"x 1.1234567 w", -1, NULL, NULL, 0, 0, 0},
	    {"x 1. w", -1, NULL, NULL, 0, 0, 0},
	    {"x -1 w", -1, NULL, NULL, 0, 0, 0},
	    {"x 1 kwh", -1, NULL, NULL, 0, 0, 0},
	    {"x 1 uj kind=cpu", -1, NULL, NULL, 0, 0, 0},
	    {"x 1 w range=5", -1, NULL, NULL, 0, 0, 0},
	    {"x 1 uj range=0", -1, NULL, NULL, 0, 0, 0},
	    {"x 1 uj extra", -1, NULL, NULL, 0, 0, 0},
	    {"bad/name 1 uj", -1, NULL, NULL, 0, 0, 0},
	    {"x 99999999999999999999 uj", -1, NULL, NULL, 0, 0, 0},
	    {"a234567890123456789012345678901234567890123456789012345678901234 1 uj", -1, NULL,
	     NULL, 0, 0, 0},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct pd_exec_line l;
		char err[256] = "";
		int rc = exec_parse_line(t[i].line, &l, err, sizeof(err));
		if (rc != t[i].rc)
			printf("#   \"%s\": rc %d (%s), expected %d\n", t[i].line, rc, err,
			       t[i].rc);
		CHECK(rc == t[i].rc);
		if (rc == -1)
			CHECK(err[0] != '\0');
		if (rc != 1 || t[i].rc != 1)
			continue;
		CHECK_STR(l.zone, t[i].zone);
		CHECK_STR(l.kind, t[i].kind);
		CHECK(l.unit == t[i].unit);
		CHECK_U64(l.value, t[i].value);
		CHECK_U64(l.range_uj, t[i].range);
	}
}

/* @NS: the meter's time of a reading, an option like the others. */
static void test_parse_time(void)
{
	struct pd_exec_line l;
	char err[256] = "";
	CHECK(exec_parse_line("platform 100 w @1700000000123456789", &l, err, sizeof(err)) == 1);
	CHECK_U64(l.t_ns, 1700000000123456789ull);
	CHECK_U64(l.value, 100000000);
	CHECK(exec_parse_line("x 5 uj @12 range=9 kind=dram\r", &l, err, sizeof(err)) == 1);
	CHECK_U64(l.t_ns, 12);
	CHECK_U64(l.range_uj, 9);
	CHECK_STR(l.kind, "dram");
	CHECK(exec_parse_line("x 5 uj", &l, err, sizeof(err)) == 1);
	CHECK_U64(l.t_ns, 0);
	static const char *const bad[] = {"x 5 w @",   "x 5 w @0",   "x 5 w @1.5",
					  "x 5 w @-3", "x 5 w @12a", "x 5 w @9223372036854775808"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(exec_parse_line(bad[i], &l, err, sizeof(err)) == -1);
		CHECK(err[0] != '\0');
	}
}

static struct pd_opts exec_opts(const char *cmd, bool stream)
{
	struct pd_opts o = fake_opts();
	fake_set("exec", cmd);
	fake_set("exec_mode", stream ? "stream" : "sample");
	fake_set("exec_timeout", "2s");
	o.interval_ns = 1000 * MS;
	return o;
}

static void test_sample_mode(void)
{
	fake_new();
	fake_write("out",
		   "package-0 1000 uj\nmeter 100 w kind=platform\ncounter 900 uj range=1000\n");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cat %s/out; test ! -e %s/fail", fake_root, fake_root);
	struct pd_opts o = exec_opts(cmd, false);
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 3);
	struct wb_power p;
	/* the baselines were taken now, on the real clocks: sample a second later */
	uint64_t t = wb_grid_next(wb_now_ns(), 1000 * MS), m = wb_mono_ns() + (t - wb_now_ns());
	fake_write("out", "package-0 1500 uj\nmeter 100 w\ncounter 100 uj\n");
	CHECK_U64(pd_set_sample(set, t, m, &p), 3);
	CHECK_U64(sample_zone(&p, "package-0")->energy_uj, 1500);
	CHECK_U64(sample_zone(&p, "counter")->energy_uj, 900 + 201); /* wrapped at range 1000 */
	CHECK_U64(sample_zone(&p, "counter")->max_energy_range_uj, 1000);
	const struct wb_power_zone *mz = sample_zone(&p, "meter");
	CHECK(mz != NULL);
	if (mz) {
		CHECK_STR(mz->zone, "platform");
		CHECK_STR(mz->source, "exec");
		CHECK_STR(mz->path, cmd);
	}
	uint64_t meter0 = mz ? mz->energy_uj : 0;
	free(p.zones);
	/* one zone missing and a garbage line: the one good line is published */
	fake_write("out", "package-0 2500 uj\nmeter lots w\n");
	CHECK_U64(pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p), 1);
	CHECK_U64(sample_zone(&p, "package-0")->energy_uj, 2500);
	CHECK(sample_zone(&p, "counter") == NULL);
	CHECK_U64(set->counts.parse_errors, 1);
	free(p.zones);
	/* watts over two grid steps since the last good reading: 100 W * 2 s */
	fake_write("out", "meter 100 w\n");
	CHECK_U64(pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p), 1);
	CHECK_U64(sample_zone(&p, "meter")->energy_uj, meter0 + 200000000);
	free(p.zones);
	/* a failing command: nothing from it is used */
	fake_write("fail", "1\n");
	CHECK_U64(pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p), 0);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 1);
	free(p.zones);
	pd_set_destroy(&set);
}

static void test_timeout_and_env(void)
{
	fake_new();
	struct pd_opts o = exec_opts(
	    "test \"$WATTBUS_INTERVAL_NS\" = 1000000000 && echo \"z 1 uj\"; test \"$WATTBUS_SAMPLE_T_NS\" = 1700000001000000000 && sleep 30; echo z 2 uj",
	    false);
	fake_set("exec_timeout", "300ms");
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	struct wb_power p;
	uint64_t m = wb_mono_ns();
	CHECK_U64(pd_set_sample(set, T0, m, &p), 1);
	free(p.zones);
	uint64_t start = wb_mono_ns();
	CHECK_U64(pd_set_sample(set, T0 + 1000 * MS, m + 1000 * MS, &p), 0);
	uint64_t took = wb_mono_ns() - start;
	/* killed at the timeout, the sleep with it: never waited for (30 s), however loaded */
	CHECK(took >= 300 * MS && took < 20000 * MS);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 1);
	free(p.zones);
	pd_set_destroy(&set);

	/*
	 * The start-up run has the whole exec_timeout; a sample's run only the interval. A first
	 * run of 300 ms at a 100 ms interval names the zone; the same run at a sample is cut.
	 */
	o = exec_opts("sleep 0.3; echo z 1 uj", false);
	o.interval_ns = 100 * MS;
	set = pd_set_new(&o);
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	CHECK_U64(pd_set_sample(set, T0, wb_mono_ns(), &p), 0);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 1);
	free(p.zones);
	pd_set_destroy(&set);

	o = exec_opts("exit 1", false);
	set = pd_set_new(&o);
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "exited with status 1") != NULL);
	pd_set_destroy(&set);
	o = exec_opts("echo hello", false);
	set = pd_set_new(&o);
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no valid reading") != NULL);
	pd_set_destroy(&set);
	o = exec_opts("", false);
	set = pd_set_new(&o);
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no command") != NULL);
	pd_set_destroy(&set);
}

/* Take what the set's sources have (powerd's loop would) until counter name reaches min, or 10 s
 * have passed. */
static void wait_counter(struct pd_set *set, const char *name, uint64_t min)
{
	uint64_t end = wb_mono_ns() + 10000 * MS;
	while (pd_set_counter(set, name) < min && wb_mono_ns() < end)
		pd_set_wait(set, 50 * MS);
}

/*
 * powerd's way (retry): the start-up run ends on the loop, not in discover; a command that fails
 * at start, or prints nothing valid, keeps the source; it runs at every sample, and its zones
 * come with its first good run.
 */
static void test_retry(void)
{
	fake_new();
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cat %s/out", fake_root);
	struct pd_opts o = exec_opts(cmd, false);
	o.retry = true;
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	CHECK(set->used & (1u << pd_source_index(&exec_source)));
	wait_counter(set, "exec_failures", 1);
	CHECK(pd_set_find(set, "package-0") == NULL);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 1);
	struct wb_power p;
	uint64_t t = T0, m = wb_mono_ns();
	CHECK_U64(pd_set_sample(set, t, m, &p), 0);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 2);
	free(p.zones);
	/* the meter is ready: the zone appears, its first reading the baseline, then counts */
	fake_write("out", "package-0 1000 uj\n");
	pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p);
	free(p.zones);
	CHECK(pd_set_find(set, "package-0") != NULL);
	fake_write("out", "package-0 1700 uj\n");
	CHECK_U64(pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p), 1);
	CHECK_U64(sample_zone(&p, "package-0")->energy_uj, 1700);
	free(p.zones);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 2);
	pd_set_destroy(&set);

	/* nothing valid at start: kept as well (a meter that prints N/A while it warms up), and
	 * not a failed run; its zone comes with its first valid line */
	snprintf(
	    cmd, sizeof(cmd),
	    "n=$(cat %s/runs 2>/dev/null || echo 0); echo $((n + 1)) >%s/runs; if [ $n = 0 ]; then echo hello; else echo z $((n * 100)) uj; fi",
	    fake_root, fake_root);
	o = exec_opts(cmd, false);
	o.retry = true;
	set = pd_set_new(&o);
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	uint64_t end = wb_mono_ns() + 10000 * MS;
	while (!pd_set_find(set, "z") && wb_mono_ns() < end) {
		pd_set_sample(set, t += 1000 * MS, m += 1000 * MS, &p);
		free(p.zones);
	}
	CHECK(pd_set_find(set, "z") != NULL);
	CHECK_U64(pd_set_counter(set, "exec_failures"), 0);
	CHECK_U64(pd_set_counter(set, "parse_errors"), 1); /* the start-up run's "hello" */
	pd_set_destroy(&set);
}

/* Wait until the stream has delivered a reading for zone name. */
static bool stream_until(struct pd_set *set, const char *name, int ms)
{
	uint64_t end = wb_mono_ns() + (uint64_t)ms * MS;
	while (wb_mono_ns() < end) {
		struct pd_zone *z = pd_set_find(set, name);
		if (z && z->updated)
			return true;
		int fd = exec_stream_fd(set);
		if (!exec_stream_running(set))
			return false;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		poll(&pfd, 1, 50);
		if (exec_stream_read(set) < 0)
			return false;
	}
	return false;
}

static void test_stream_mode(void)
{
	fake_new();
	fake_write("out", "gpu-0 10 w\n");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "while [ -e %s/out ]; do cat %s/out; sleep 0.05; done",
		 fake_root, fake_root);
	struct pd_opts o = exec_opts(cmd, true);
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	CHECK(exec_stream_fd(set) >= 0);
	struct pd_zone *z = pd_set_find(set, "gpu-0");
	CHECK(z && z->is_power && !strcmp(z->kind, "gpu"));
	CHECK(stream_until(set, "gpu-0", 2000));
	struct wb_power p;
	CHECK_U64(pd_set_sample(set, T0, wb_mono_ns(), &p), 1);
	free(p.zones);
	/* no line since the last sample: the zone is left out rather than shown flat */
	CHECK_U64(pd_set_sample(set, T0 + 1, wb_mono_ns(), &p), 0);
	free(p.zones);
	uint64_t before = z->energy_uj, t_before = z->integ.last_mono_ns;
	CHECK(stream_until(set, "gpu-0", 2000));
	CHECK_U64(pd_set_sample(set, T0 + 2, wb_mono_ns(), &p), 1);
	/* 10 W over the time between the lines (receipt times), to within a line's rounding */
	uint64_t dt_ns = z->integ.last_mono_ns - t_before;
	CHECK(p.n_zones && p.zones[0].energy_uj > before);
	CHECK_NEAR((double)(p.zones[0].energy_uj - before), 10.0 * (double)dt_ns / 1e3, 20000.0);
	free(p.zones);
	/* the command ends: counted, restarted after a second, on the same descriptor */
	int fd = exec_stream_fd(set);
	fake_remove("out");
	uint64_t end = wb_mono_ns() + 3000 * MS;
	while (exec_stream_running(set) && wb_mono_ns() < end) {
		struct pollfd pfd = {.fd = exec_stream_fd(set), .events = POLLIN};
		poll(&pfd, 1, 50);
		exec_stream_read(set);
	}
	CHECK(!exec_stream_running(set));
	CHECK(exec_stream_fd(set) == fd);
	struct pollfd idle = {.fd = fd, .events = POLLIN};
	CHECK(poll(&idle, 1, 0) == 0); /* the idle pipe is never readable */
	CHECK_U64(pd_set_counter(set, "exec_failures"), 1);
	CHECK(exec_stream_tend(set) == 0); /* not before a second has passed */
	fake_write("out", "gpu-0 10 w\n");
	usleep(1100000);
	CHECK(exec_stream_tend(set) == 1);
	CHECK(exec_stream_fd(set) == fd);
	CHECK(stream_until(set, "gpu-0", 2000));
	pd_set_destroy(&set);
}

/*
 * A meter that buffers its output: 13 readings of 100 W, 100 ms apart, arrive in one read
 * 1.2 s late. With @NS they integrate to 100 W * 1.2 s; without, every line gets the read's
 * time, so all but the first are lost, and that is counted.
 */
static void stream_burst(bool stamped, uint64_t *energy_uj, uint64_t *burst_lines)
{
	char cmd[1024];
	snprintf(
	    cmd, sizeof(cmd),
	    "t0=$(date +%%s%%N); sleep 1.2; i=0; out=''; while [ $i -le 12 ]; do out=\"${out}platform 100 w%s\n\"; i=$((i + 1)); done; printf \"$out\"; sleep 30",
	    stamped ? " @$((t0 + i * 100000000))" : "");
	struct pd_opts o = exec_opts(cmd, true);
	fake_set("exec_timeout", "200ms"); /* the zone appears with the burst, after discovery */
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	CHECK(stream_until(set, "platform", 3000));
	struct pd_zone *z = pd_set_find(set, "platform");
	*energy_uj = z ? z->energy_uj : 0;
	*burst_lines = pd_set_counter(set, "exec_burst_lines");
	pd_set_destroy(&set);
}

static void test_stream_burst(void)
{
	uint64_t uj, bursts;
	stream_burst(true, &uj, &bursts);
	CHECK_U64(uj, 120000000);
	CHECK_U64(bursts, 0);
	stream_burst(false, &uj, &bursts);
	CHECK_U64(uj, 0);
	CHECK_U64(bursts, 12);
}

/* The pid a command wrote to fake_root/rel, once it has (0 after 10 s). */
static pid_t wait_pid_file(const char *rel)
{
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	uint64_t end = wb_mono_ns() + 10000 * MS;
	while (wb_mono_ns() < end) {
		FILE *f = fopen(path, "r");
		long pid = 0;
		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (pid > 0)
			return (pid_t)pid;
		usleep(10000);
	}
	return 0;
}

/*
 * A sample's run is a job off the loop: begin returns with the run going (the sample busy), and
 * destroying the set (powerd's stop) cancels it, killing the command long before its own
 * deadline (10 s here).
 */
static void test_run_off_loop(void)
{
	fake_new();
	char cmd[1024];
	snprintf(
	    cmd, sizeof(cmd),
	    "n=$(cat %s/runs 2>/dev/null || echo 0); echo $((n + 1)) >%s/runs; if [ $n = 0 ]; then echo z 1 uj; else echo $$ >%s/pid; exec sleep 600; fi",
	    fake_root, fake_root, fake_root);
	struct pd_opts o = exec_opts(cmd, false);
	fake_set("exec_timeout", "10s");
	o.interval_ns = 10000 * MS;
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(exec_discover(set, &o, why, sizeof(why)) == 1);
	size_t before = wb_jobs_running();
	pd_set_sample_begin(set, T0, wb_mono_ns());
	CHECK(pd_set_busy(set)); /* a run held on the caller would be over */
	CHECK_U64(wb_jobs_running(), before + 1);
	pid_t pid = wait_pid_file("pid");
	CHECK(pid > 0);
	CHECK(pd_set_wait(set, 0)); /* still going */
	pd_set_destroy(&set);
	uint64_t end = wb_mono_ns() + 5000 * MS;
	while (pid > 0 && kill(pid, 0) == 0 && wb_mono_ns() < end)
		usleep(10000);
	CHECK(pid > 0 && kill(pid, 0) < 0 && errno == ESRCH);
	while (wb_jobs_running() > before && wb_mono_ns() < end)
		usleep(10000);
	CHECK_U64(wb_jobs_running(), before);
}

static const struct unit_case cases[] = {
    {"line format", test_parse},
    {"line format: @NS timestamps", test_parse_time},
    {"stream mode: a buffered burst, with and without @NS", test_stream_burst},
    {"sample mode: counters, watts, wrap, garbage, failure", test_sample_mode},
    {"sample mode: timeout, environment, unusable commands", test_timeout_and_env},
    {"sample mode, powerd's way: a failing start-up run keeps the source", test_retry},
    {"stream mode: readings, silence, restart", test_stream_mode},
    {"sample mode: a run is a job, cancelled with the set", test_run_off_loop},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
