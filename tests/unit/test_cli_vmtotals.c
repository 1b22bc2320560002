/*
 * cli/vmtotals.c: what `wattbus vmpub` tells the guest of vm1 from the host's
 * estimates: the VM's totals of estimd's count, repeated in a slot without the
 * VM, 0 in a new count, and nothing it would have to guess.
 */
#include "../../cli/cli.h"
#include "unit.h"

#define J 1000000ull

static struct vm_totals vt;
static const char *vm_id = "vm1"; /* the VM the host's estimates carry */
static struct wb_est_zone out[VM_TOTALS_ZONES_MAX];

/* The host's estimate of slot k in count epoch of src; with vm1 when vm_total is not NULL. */
static size_t slot(const char *src, uint64_t epoch, uint64_t k, const uint64_t *vm_total,
		   const uint64_t *vm_slot)
{
	static struct wb_est_zone z[2];
	static struct wb_est_group g;
	static uint64_t total[2], energy[2];
	memset(z, 0, sizeof(z));
	snprintf(z[0].name, sizeof(z[0].name), "package-0");
	snprintf(z[0].zone, sizeof(z[0].zone), "package");
	snprintf(z[1].name, sizeof(z[1].name), "dram-0");
	snprintf(z[1].zone, sizeof(z[1].zone), "dram");
	z[1].index = 0;
	struct wb_estimate e = {.t0 = k * 1000000000ull, .t1 = (k + 1) * 1000000000ull};
	snprintf(e.env.host, sizeof(e.env.host), "hv");
	snprintf(e.env.src, sizeof(e.env.src), "%s", src);
	e.total_epoch = epoch;
	e.zones = z;
	e.n_zones = 2;
	if (vm_total) {
		memset(&g, 0, sizeof(g));
		snprintf(g.id, sizeof(g.id), "%s", vm_id);
		for (int i = 0; i < 2; i++) {
			total[i] = vm_total[i];
			energy[i] = vm_slot[i];
		}
		g.total_uj = total;
		g.n_total_uj = 2;
		g.energy_uj = energy;
		g.n_energy_uj = 2;
		e.vms = &g;
		e.n_vms = 1;
	}
	return vm_totals_build(&vt, &e, out);
}

/* One host estimate and what vmpub makes of it for vm1 (package-0, dram-0). */
struct step {
	const char *why;
	const char *src;
	uint64_t epoch;
	bool vm;		    /* vm1 in the slot, with these totals and slot energies */
	uint64_t total[2], slot[2]; /* the VM's, per zone */
	size_t n;		    /* zones said (0: nothing) */
	uint64_t said[2], added[2]; /* total_uj and energy_uj said, per zone */
};

static const struct step counts[] = {
    {"just started, vm1 idle: not known, nothing said", "estimd", 7, false, {0}, {0}, 0, {0}, {0}},
    {"vm1 runs: its totals, the slot's own as added",
     "estimd",
     7,
     true,
     {50 * J, 5 * J},
     {2 * J, 1 * J},
     2,
     {50 * J, 5 * J},
     {2 * J, 1 * J}},
    {"idle: the same totals again, nothing added",
     "estimd",
     7,
     false,
     {0},
     {0},
     2,
     {50 * J, 5 * J},
     {0, 0}},
    {"one estimate lost before: the totals' step holds it",
     "estimd",
     7,
     true,
     {56 * J, 6 * J},
     {3 * J, 0},
     2,
     {56 * J, 6 * J},
     {6 * J, 1 * J}},
    {"estimd resumed an older checkpoint: totals as told, the slot's own added",
     "estimd",
     7,
     true,
     {53 * J, 6 * J},
     {1 * J, 0},
     2,
     {53 * J, 6 * J},
     {1 * J, 0}},
    {"a new count, vm1 idle: at 0 in it", "estimd", 8, false, {0}, {0}, 2, {0, 0}, {0, 0}},
    {"vm1 runs in the new count",
     "estimd",
     8,
     true,
     {3 * J, 1 * J},
     {3 * J, 1 * J},
     2,
     {3 * J, 1 * J},
     {3 * J, 1 * J}},
    {"the same total_epoch from another estimd: another count",
     "estimd-b",
     8,
     true,
     {90 * J, 9 * J},
     {2 * J, 0},
     2,
     {90 * J, 9 * J},
     {2 * J, 0}},
    {"an estimate without totals: nothing said", "estimd", 0, false, {0}, {0}, 0, {0}, {0}},
};

static void no_guess_then_counts(void)
{
	memset(&vt, 0, sizeof(vt));
	vt.vm = "vm1";
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		const struct step *st = &counts[k];
		printf("# %s\n", st->why);
		size_t n = slot(st->src, st->epoch, k, st->vm ? st->total : NULL, st->slot);
		CHECK_U64(n, st->n);
		for (size_t z = 0; z < n && z < 2; z++) {
			CHECK_STR(out[z].name, z ? "dram-0" : "package-0");
			CHECK_STR(out[z].zone, z ? "dram" : "package");
			CHECK_U64(out[z].total_uj, st->said[z]);
			CHECK_U64(out[z].energy_uj, st->added[z]);
		}
	}
}

static void fresh_vmpub_in_a_new_count(void)
{
	/* Started during count 7 (never saw it start): vm1 idle, nothing; a new count seen to
	 * start after count 7 is known to hold vm1 at 0 only once count 7 was followed. */
	memset(&vt, 0, sizeof(vt));
	vt.vm = "vm1";
	CHECK_U64(slot("estimd", 7, 0, NULL, NULL), 0);
	CHECK_U64(slot("estimd", 8, 1, NULL, NULL), 0);
	/* vm2's totals are not vm1's */
	vm_id = "vm2";
	CHECK_U64(slot("estimd", 8, 2, (uint64_t[]){9 * J, 1 * J}, (uint64_t[]){1 * J, 0}), 0);
	vm_id = "vm1";
	CHECK_U64(vt.nz, 0);
	/* vm1 runs: from then on it is known */
	CHECK_U64(slot("estimd", 8, 3, (uint64_t[]){4 * J, 1 * J}, (uint64_t[]){1 * J, 0}), 2);
	CHECK_U64(out[0].total_uj, 4 * J);
}

static const struct unit_case cases[] = {
    {"the VM's totals of a count, repeated, 0 in a new count, never guessed", no_guess_then_counts},
    {"a vmpub started mid-count says nothing until it knows", fresh_vmpub_in_a_new_count},
};

UNIT_MAIN(cases)
