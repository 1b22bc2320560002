/*
 * alignd's engine when memory runs out where it must not crash: realloc is
 * interposed here so that the first allocation of a curve's samples fails
 * on demand, and the engine has to carry on without that zone.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "../../alignd/alignd.h"
#include "unit.h"

#include "alignd_unit.h"

/* While set, a curve's first sample array (16 samples, from NULL) cannot be allocated. */
static bool fail_samples;
static size_t failed;

void *realloc(void *ptr, size_t size)
{
	static void *(*next)(void *, size_t);
	if (!next)
		next = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	if (fail_samples && !ptr && size == 16 * sizeof(struct curve_sample)) {
		failed++;
		return NULL;
	}
	return next(ptr, size);
}

static size_t ngot;
static uint64_t got_uj;

static void collect(struct wb_msg *m, void *arg)
{
	(void)arg;
	ngot++;
	for (size_t i = 0; i < m->aligned.n_zones; i++)
		got_uj += m->aligned.zones[i].energy_uj;
}

static void power1(struct align *a, uint64_t t, uint64_t e, uint64_t recv)
{
	struct wb_power_zone z = {.name = "package-0", .zone = "package", .energy_uj = e};
	struct wb_power p = {.t = t, .interval_ns = S, .zones = &z, .n_zones = 1};
	snprintf(p.env.host, sizeof(p.env.host), "h");
	p.env.epoch = 1;
	align_power(a, &p, recv);
}

static void usage1(struct align *a, uint64_t t, uint64_t recv)
{
	struct wb_usage u = {.t = t, .interval_ns = S, .ncpu = 1};
	snprintf(u.env.host, sizeof(u.env.host), "h");
	u.env.epoch = 1;
	u.cpu.user_ns = t / 2;
	u.cpu.idle_ns = t / 2;
	align_usage(a, &u, 0, recv);
}

/* A saved zone whose samples cannot be allocated at load: skipped, no NULL dereference. */
static void load_without_memory(void)
{
	char path[256];
	unit_tmpfile(path, sizeof(path), "alignd-nomem-XXXXXX");
	struct align_conf c = alignd_unit_conf(4, 100, 8, 4096);
	struct align *a = align_new(&c, collect, NULL);
	for (uint64_t t = 0; t <= 3; t++) {
		power1(a, t * S, t * 100000000, t * S + 1 * MS);
		usage1(a, t * S, t * S + 2 * MS);
	}
	align_flush(a, 4 * S);
	CHECK(align_save(a, path, 4 * S, true) == 0);
	align_destroy(&a);

	a = align_new(&c, collect, NULL);
	fail_samples = true;
	CHECK(align_load(a, path, 5 * S, 60 * S) == 0);
	fail_samples = false;
	CHECK(failed >= 1);
	/* The zone starts over from its next sample: slots measured again from then on. */
	ngot = 0;
	got_uj = 0;
	for (uint64_t t = 6; t <= 9; t++) {
		power1(a, t * S, t * 100000000, t * S + 1 * MS);
		usage1(a, t * S, t * S + 2 * MS);
	}
	CHECK_U64(ngot, 4);
	CHECK_U64(got_uj, 300000000); /* 7..9 s at 100 W; nothing invented for the lost state */
	align_destroy(&a);
	unlink(path);
}

static const struct unit_case cases[] = {
    {"a state whose curve cannot be allocated is skipped", load_without_memory},
};

UNIT_MAIN(cases)
