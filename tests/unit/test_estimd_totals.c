/*
 * estimd's node totals (estimate.zones[].*total_uj): aligned slots lost on the
 * way are recovered from alignd's totals and split in the covering slot's
 * ratio; a restart from the state file continues them; a new alignd count, a
 * resent slot and model mode are handled as schemas/README.md says.
 */
#include <unistd.h>

#include "codec.h"
#include "../../estimd/estimd.h"
#include "unit.h"

#include "estimd_unit.h"

#define S 1000000000ull
#define T0 (1700000000ull * S)

/* A simulated alignd: slot k is [T0 + k s, T0 + (k + 1) s] with known energies and totals. */
struct sim {
	uint64_t epoch;
	uint64_t total[2];
};

static uint64_t e_of(uint64_t k, int z)
{
	return z == 0 ? 20000000 + (k * 7919) % 5000000 : 3000000 + (k * 104729) % 700000;
}

/* busy = k % 4 + 1 quarters of the slot */
static void slot_make(struct wb_aligned *a, struct sim *sim, uint64_t k)
{
	static struct wb_slot_zone zones[2];
	static struct wb_slot_proc procs[1];
	memset(a, 0, sizeof(*a));
	memset(zones, 0, sizeof(zones));
	memset(procs, 0, sizeof(procs));
	snprintf(a->env.host, sizeof(a->env.host), "h1");
	snprintf(a->env.src, sizeof(a->env.src), "alignd");
	a->env.seq = k;
	a->t0 = T0 + k * S;
	a->t1 = a->t0 + S;
	a->ncpu = 1;
	uint64_t busy = (k % 4 + 1) * S / 4;
	a->cpu.user_ns = busy;
	a->cpu.idle_ns = S - busy;
	procs[0].pid = 42;
	procs[0].cpu_ns = busy;
	snprintf(procs[0].comm, sizeof(procs[0].comm), "worker");
	a->procs = procs;
	a->n_procs = 1;
	a->total_epoch = sim->epoch;
	for (int z = 0; z < 2; z++) {
		snprintf(zones[z].name, sizeof(zones[z].name), z ? "dram-0" : "package-0");
		snprintf(zones[z].zone, sizeof(zones[z].zone), z ? "dram" : "package");
		zones[z].energy_uj = e_of(k, z);
		sim->total[z] += zones[z].energy_uj;
		zones[z].total_uj = sim->epoch ? sim->total[z] : 0;
	}
	a->zones = zones;
	a->n_zones = 2;
	a->quality.coverage = 1;
}

static struct est_conf conf_default(void)
{
	struct est_conf c = estimd_unit_conf();
	c.bound.max_zone_w = WB_ZONE_MAX_W; /* [global] max_zone_w's default */
	return c;
}

/* Feed slot k (or only advance the simulated alignd when lost) and return the estimate. */
static int feed(struct estimator *e, struct sim *sim, uint64_t k, bool lost,
		struct wb_estimate *out, struct est_result *res)
{
	struct wb_aligned a;
	char err[256];
	slot_make(&a, sim, k);
	if (lost)
		return 1;
	int rc = estimator_slot(e, &a, out, res, err, sizeof(err));
	CHECK(rc == 0);
	return rc;
}

static void check_zone_sums(const struct wb_estimate *out)
{
	for (size_t z = 0; z < out->n_zones; z++) {
		const struct wb_est_zone *ez = &out->zones[z];
		CHECK_U64(ez->active_total_uj + ez->idle_total_uj, ez->total_uj);
	}
}

/* Lost aligned slots: the totals still hold all of alignd's energy, split in the covering ratio. */
static void lost_slots_recovered(void)
{
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = T0 - 5 * S};
	struct wb_estimate out;
	struct est_result res;
	uint64_t prev_active = 0, prev_idle = 0, prev_total[2] = {0, 0}, epoch = 0;
	for (uint64_t k = 0; k < 40; k++) {
		bool lost = k % 5 == 2 || k == 17 || k == 18;
		if (feed(e, &sim, k, lost, &out, &res) != 0)
			continue;
		check_zone_sums(&out);
		CHECK(out.total_epoch != 0);
		if (!epoch)
			epoch = out.total_epoch;
		CHECK_U64(out.total_epoch, epoch);
		/* The node totals equal alignd's: nothing lost. */
		CHECK_U64(out.zones[0].total_uj, sim.total[0]);
		CHECK_U64(out.zones[1].total_uj, sim.total[1]);
		uint64_t d = out.zones[0].total_uj - prev_total[0];
		uint64_t d1 = out.zones[1].total_uj - prev_total[1];
		if (k % 5 == 3 || k == 19) {
			CHECK(d > out.zones[0].energy_uj);
			CHECK_U64(res.recovered_uj,
				  d - out.zones[0].energy_uj + d1 - out.zones[1].energy_uj);
			/* The extra follows the covering slot's active share (busy/total). */
			uint64_t want = (uint64_t)((unsigned __int128)d * out.zones[0].active_uj /
						   out.zones[0].energy_uj);
			CHECK_U64(out.zones[0].active_total_uj - prev_active, want);
			CHECK_U64(out.zones[0].idle_total_uj - prev_idle, d - want);
		} else {
			CHECK_U64(res.recovered_uj, 0);
			CHECK_U64(d, out.zones[0].energy_uj);
			CHECK_U64(out.zones[0].active_total_uj - prev_active,
				  out.zones[0].active_uj);
		}
		prev_total[0] = out.zones[0].total_uj;
		prev_total[1] = out.zones[1].total_uj;
		prev_active = out.zones[0].active_total_uj;
		prev_idle = out.zones[0].idle_total_uj;
	}
	estimator_destroy(&e);
}

/*
 * estimd killed after its checkpoint and restarted from it: the slots it
 * estimated after the checkpoint and the ones published while it was down are
 * in the totals, exactly, under the same total_epoch.
 */
static void restart_from_state(void)
{
	char path[256];
	unit_tmpfile(path, sizeof(path), "estimd-state-XXXXXX");
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = 77};
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	for (uint64_t k = 0; k < 10; k++)
		feed(e, &sim, k, false, &out, &res);
	CHECK(estimd_state_save(e, path, T0 + 10 * S, true, err, sizeof(err)) == 0);
	for (uint64_t k = 10; k < 14; k++)
		feed(e, &sim, k, false, &out, &res);
	uint64_t epoch = out.total_epoch, before = out.zones[0].total_uj;
	estimator_destroy(&e); /* killed: no save */

	e = estimator_new(&c);
	size_t n, ngpu;
	CHECK(estimd_state_load(e, path, &n, &ngpu, err, sizeof(err)) == 0);
	CHECK_U64(n, 1);
	for (uint64_t k = 14; k < 17; k++) /* published while estimd was down */
		slot_make(&(struct wb_aligned){0}, &sim, k);
	feed(e, &sim, 17, false, &out, &res);
	CHECK_U64(out.total_epoch, epoch);
	CHECK_U64(out.zones[0].total_uj, sim.total[0]);
	CHECK_U64(out.zones[1].total_uj, sim.total[1]);
	CHECK(out.zones[0].total_uj > before + out.zones[0].energy_uj);
	check_zone_sums(&out);
	estimator_destroy(&e);

	/* A damaged state is refused with the file named. */
	unit_write(path, "{\"version\": 1, \"hosts\": [");
	e = estimator_new(&c);
	CHECK(estimd_state_load(e, path, &n, &ngpu, err, sizeof(err)) < 0);
	CHECK(strstr(err, path) != NULL);
	estimator_destroy(&e);
	unlink(path);
}

/* alignd's totals start over (restarted without state): the slot's own energy, a new baseline. */
static void new_alignd_count(void)
{
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = 5};
	struct wb_estimate out;
	struct est_result res;
	for (uint64_t k = 0; k < 5; k++)
		feed(e, &sim, k, false, &out, &res);
	uint64_t t = out.zones[0].total_uj, epoch = out.total_epoch;
	struct sim sim2 = {.epoch = 9};
	feed(e, &sim2, 7, false, &out, &res); /* slots 5 and 6 never published */
	CHECK_U64(out.total_epoch, epoch);    /* ours goes on */
	CHECK_U64(out.zones[0].total_uj, t + e_of(7, 0));
	CHECK_U64(res.recovered_uj, 0);
	feed(e, &sim2, 8, true, &out, &res);
	feed(e, &sim2, 9, false, &out, &res); /* and diffs again within the new count */
	CHECK_U64(out.zones[0].total_uj, t + e_of(7, 0) + e_of(8, 0) + e_of(9, 0));

	/* No totals on the wire (another producer): slot values. */
	struct sim none = {.epoch = 0};
	uint64_t before = out.zones[0].total_uj;
	feed(e, &none, 11, false, &out, &res);
	CHECK_U64(out.zones[0].total_uj, before + e_of(11, 0));
	estimator_destroy(&e);
}

/* A slot sent again (alignd resumed from an older checkpoint): not counted twice. */
static void resent_slots(void)
{
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = 5};
	struct wb_estimate out;
	struct est_result res;
	for (uint64_t k = 0; k < 6; k++)
		feed(e, &sim, k, false, &out, &res);
	uint64_t t = out.zones[0].total_uj;
	/* The same count resumed at the end of slot 3: slots 4 and 5 come again, then 6. */
	struct sim again = {.epoch = 5,
			    .total = {sim.total[0] - e_of(5, 0) - e_of(4, 0),
				      sim.total[1] - e_of(5, 1) - e_of(4, 1)}};
	feed(e, &again, 4, false, &out, &res);
	CHECK(res.stale);
	CHECK_U64(out.zones[0].total_uj, t);
	feed(e, &again, 5, false, &out, &res);
	CHECK(res.stale);
	feed(e, &again, 6, false, &out, &res);
	CHECK(!res.stale);
	CHECK_U64(out.zones[0].total_uj, t + e_of(6, 0));

	/* A new count whose first slot overlaps the last one by half: only the new half counts. */
	struct wb_aligned a;
	struct sim other = {.epoch = 99};
	char err[256];
	slot_make(&a, &other, 7);
	a.t0 -= S / 2;
	uint64_t before = out.zones[0].total_uj;
	CHECK(estimator_slot(e, &a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].total_uj, before + e_of(7, 0) * 2 / 3);
	check_zone_sums(&out);
	estimator_destroy(&e);
}

/* Model mode: a gap in time within one alignd count is filled at the slot's modelled power. */
static void model_mode_gap(void)
{
	struct est_conf c = conf_default();
	c.mode = EST_MODEL;
	struct estimator *e = estimator_new(&c);
	struct model *m = calloc(1, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "flat");
	m->form = MODEL_LINEAR;
	m->output = MODEL_ABS;
	m->nzones = 1;
	snprintf(m->zones[0].zone, sizeof(m->zones[0].zone), "package");
	m->zones[0].bias_w = 10; /* 10 W whatever the load: 10 J per 1 s slot */
	m->zones[0].nfeat = 1;
	snprintf(m->zones[0].feat[0].name, sizeof(m->zones[0].feat[0].name), "bpf_cpu_time_ms");
	m->zones[0].feat[0].id = FEAT_CPU_TIME_MS;
	m->zones[0].feat[0].scale = 1;
	estimator_set_model(e, m);
	struct sim sim = {.epoch = 3};
	struct wb_estimate out;
	struct est_result res;
	feed(e, &sim, 0, false, &out, &res);
	CHECK_U64(out.n_zones, 1);
	CHECK_U64(out.zones[0].total_uj, 10000000);
	feed(e, &sim, 1, true, &out, &res);
	feed(e, &sim, 2, true, &out, &res);
	feed(e, &sim, 3, false, &out, &res);
	CHECK_U64(out.zones[0].energy_uj, 10000000);
	CHECK_U64(out.zones[0].total_uj, 40000000);
	CHECK_U64(res.recovered_uj, 20000000);
	check_zone_sums(&out);
	estimator_destroy(&e);
}

/*
 * Forged host names, each with 200 zones and idle regression on: the learning
 * state and totals of all hosts together stay within the budget, the new hosts
 * beyond it are refused (budget_refused), and the host counted before keeps
 * exact totals.
 */
static void budget_across_hosts(void)
{
	struct est_conf c = conf_default();
	c.idle.method = IDLE_REGRESSION;
	c.budget_bytes = 256 << 10;
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = T0 - 5 * S};
	struct wb_estimate out;
	struct est_result res;
	CHECK(feed(e, &sim, 0, false, &out, &res) == 0);
	static struct wb_slot_zone zones[200];
	size_t refused = 0;
	for (int h = 0; h < 100; h++) {
		struct wb_aligned a = {
		    .t0 = T0, .t1 = T0 + S, .ncpu = 1, .zones = zones, .n_zones = 200};
		snprintf(a.env.host, sizeof(a.env.host), "forged%d", h);
		snprintf(a.env.src, sizeof(a.env.src), "alignd");
		a.cpu.user_ns = a.cpu.idle_ns = S / 2;
		for (int z = 0; z < 200; z++) {
			snprintf(zones[z].name, sizeof(zones[z].name), "z%d", z);
			snprintf(zones[z].zone, sizeof(zones[z].zone), "package");
			zones[z].energy_uj = 1000;
		}
		char err[256];
		if (estimator_slot(e, &a, &out, &res, err, sizeof(err)) < 0) {
			CHECK(res.budget_refused && strstr(err, "budget_mib"));
			refused++;
		}
		CHECK(estimator_budget_used(e) <= c.budget_bytes);
	}
	CHECK(refused >= 90);
	for (uint64_t k = 1; k < 5; k++) {
		CHECK(feed(e, &sim, k, false, &out, &res) == 0);
		CHECK_U64(out.zones[0].total_uj, sim.total[0]);
		CHECK_U64(out.zones[1].total_uj, sim.total[1]);
	}
	estimator_destroy(&e);
}

/* alignd's total_uj jumping by 2^62, then twice by 2^61 (hostile or broken, valid for the
 * schema): the slot's own energy is counted, the totals stay encodable. */
static void implausible_total_jump(void)
{
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = T0 - 5 * S};
	struct wb_estimate out;
	struct est_result res;
	uint64_t mine = 0;
	unsigned implausible = 0;
	for (uint64_t k = 0; k < 10; k++) {
		if (k % 3 == 2)
			sim.total[0] += k == 2 ? 1ull << 62 : 1ull << 61;
		if (feed(e, &sim, k, false, &out, &res) != 0)
			continue;
		mine += out.zones[0].energy_uj;
		implausible += res.totals_implausible;
		CHECK_U64(out.zones[0].total_uj, mine);
		CHECK(res.recovered_uj < (1ull << 40));
		check_zone_sums(&out);
		struct wb_msg m = {.kind = WB_ESTIMATE, .estimate = out};
		m.env.v = wb_kinds[WB_ESTIMATE].version;
		snprintf(m.env.kind, sizeof(m.env.kind), "estimate");
		snprintf(m.env.host, sizeof(m.env.host), "h1");
		snprintf(m.env.src, sizeof(m.env.src), "estimd");
		char *buf;
		size_t len;
		struct wb_err err;
		CHECK(wb_encode(&m, &buf, &len, &err) == 0);
		free(buf);
	}
	CHECK_U64(implausible, 3);
	estimator_destroy(&e);
}

/* One slot stamped 100 s ahead, then alignd's new count behind it (its clock set back): after
 * WB_REWIND_SAMPLES such slots the totals continue, and never go back. */
static void clock_set_back(void)
{
	struct est_conf c = conf_default();
	struct estimator *e = estimator_new(&c);
	struct sim sim = {.epoch = T0 - 5 * S};
	struct wb_estimate out;
	struct est_result res;
	for (uint64_t k = 0; k < 5; k++)
		feed(e, &sim, k, false, &out, &res);
	feed(e, &sim, 100, false, &out, &res);
	uint64_t total = out.zones[0].total_uj;
	sim = (struct sim){.epoch = T0 + 6 * S};
	unsigned stale = 0, rewound = 0;
	for (uint64_t k = 6; k < 16; k++) {
		feed(e, &sim, k, false, &out, &res);
		stale += res.stale;
		rewound += res.clock_rewound;
		if (!res.stale)
			total += out.zones[0].energy_uj;
		CHECK_U64(out.zones[0].total_uj, total);
		check_zone_sums(&out);
	}
	CHECK_U64(stale, WB_REWIND_SAMPLES - 1);
	CHECK_U64(rewound, 1);
	estimator_destroy(&e);
}

/* Slot k with one process in VM vm1's cgroup (busy as slot_make). */
static int feed_vm(struct estimator *e, struct sim *sim, uint64_t k, struct wb_estimate *out,
		   struct est_result *res)
{
	static struct wb_cgroup cg;
	struct wb_aligned a;
	char err[256];
	slot_make(&a, sim, k);
	memset(&cg, 0, sizeof(cg));
	cg.id = 7;
	snprintf(cg.path, sizeof(cg.path), "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope");
	snprintf(cg.vm, sizeof(cg.vm), "vm1");
	a.procs[0].cgroup_id = 7;
	a.cgroups = &cg;
	a.n_cgroups = 1;
	int rc = estimator_slot(e, &a, out, res, err, sizeof(err));
	CHECK(rc == 0);
	return rc;
}

/*
 * A VM's cumulative energy: the sum of its slot energies (plus its share of
 * idle with vm_idle), not advanced by a resent slot, continued after a restart
 * from the state file, and started over with a new count of the host.
 */
static void vm_totals(void)
{
	char path[256];
	unit_tmpfile(path, sizeof(path), "estimd-state-XXXXXX");
	for (int idle = 0; idle < 2; idle++) {
		struct est_conf c = conf_default();
		c.vm_idle = idle;
		struct estimator *e = estimator_new(&c);
		struct sim sim = {.epoch = 11};
		struct wb_estimate out;
		struct est_result res;
		char err[256];
		uint64_t sum[2] = {0, 0};
		for (uint64_t k = 0; k < 8; k++) {
			feed_vm(e, &sim, k, &out, &res);
			CHECK_U64(out.n_vms, 1);
			CHECK_U64(out.vms[0].n_total_uj, 2);
			for (int z = 0; z < 2; z++) {
				/* busy/total of the node = the VM's CPU share: its idle share is
				 * the zone's idle in that ratio */
				uint64_t busy = (k % 4 + 1) * S / 4;
				uint64_t share =
				    (uint64_t)((unsigned __int128)out.zones[z].idle_uj * busy / S);
				sum[z] += out.vms[0].energy_uj[z] + (idle ? share : 0);
				CHECK_U64(out.vms[0].total_uj[z], sum[z]);
			}
		}
		CHECK(sum[0] > 0 && sum[0] < out.zones[0].total_uj);
		CHECK(estimd_state_save(e, path, T0 + 8 * S, true, err, sizeof(err)) == 0);
		estimator_destroy(&e);

		e = estimator_new(&c);
		size_t n, ngpu;
		CHECK(estimd_state_load(e, path, &n, &ngpu, err, sizeof(err)) == 0);
		/* slot 7 again (stale): no VM total in it */
		struct sim again = {
		    .epoch = 11, .total = {sim.total[0] - e_of(7, 0), sim.total[1] - e_of(7, 1)}};
		feed_vm(e, &again, 7, &out, &res);
		CHECK(res.stale);
		CHECK_U64(out.vms[0].n_total_uj, 0);
		feed_vm(e, &sim, 8, &out, &res);
		uint64_t busy = 1 * S / 4;
		uint64_t share = (uint64_t)((unsigned __int128)out.zones[0].idle_uj * busy / S);
		CHECK_U64(out.vms[0].total_uj[0],
			  sum[0] + out.vms[0].energy_uj[0] + (idle ? share : 0));
		estimator_destroy(&e);
	}
	unlink(path);
}

static const struct unit_case cases[] = {
    {"a VM's cumulative energy: slots, idle share, resent slots, restart", vm_totals},
    {"a clock set back: totals continue after a few slots", clock_set_back},
    {"alignd's total jumping by 2^62 is not trusted", implausible_total_jump},
    {"lost aligned slots recovered from alignd's totals", lost_slots_recovered},
    {"a restart from the state file continues the totals", restart_from_state},
    {"a new alignd count: slot values, then differences again", new_alignd_count},
    {"slots sent again are not counted twice", resent_slots},
    {"model mode: a gap is filled at the slot's power", model_mode_gap},
    {"a memory budget across hosts", budget_across_hosts},
};

UNIT_MAIN(cases)
