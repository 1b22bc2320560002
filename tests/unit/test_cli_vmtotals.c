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

static void no_guess_then_counts(void)
{
	memset(&vt, 0, sizeof(vt));
	vt.vm = "vm1";
	/* Just started, vm1 idle: its total in this count is not known, so nothing is said. */
	CHECK_U64(slot("estimd", 7, 0, NULL, NULL), 0);
	/* vm1 runs: its totals, and the slot's own energy as what they added. */
	CHECK_U64(slot("estimd", 7, 1, (uint64_t[]){50 * J, 5 * J}, (uint64_t[]){2 * J, 1 * J}), 2);
	CHECK_STR(out[0].name, "package-0");
	CHECK_STR(out[0].zone, "package");
	CHECK_U64(out[0].total_uj, 50 * J);
	CHECK_U64(out[0].energy_uj, 2 * J);
	CHECK_STR(out[1].name, "dram-0");
	CHECK_U64(out[1].total_uj, 5 * J);
	/* idle again: the same totals, nothing added, so the guest hears from the host */
	CHECK_U64(slot("estimd", 7, 2, NULL, NULL), 2);
	CHECK_U64(out[0].total_uj, 50 * J);
	CHECK_U64(out[0].energy_uj, 0);
	CHECK_U64(out[1].total_uj, 5 * J);
	/* an estimate lost (slot 3): what the totals added since the last one built holds it */
	CHECK_U64(slot("estimd", 7, 4, (uint64_t[]){56 * J, 6 * J}, (uint64_t[]){3 * J, 0}), 2);
	CHECK_U64(out[0].total_uj, 56 * J);
	CHECK_U64(out[0].energy_uj, 6 * J);
	CHECK_U64(out[1].energy_uj, 1 * J);
	/* estimd resumed from an older checkpoint: its totals as told (the guest's follower
	 * takes them as a new baseline), the slot's own energy as what they added */
	CHECK_U64(slot("estimd", 7, 5, (uint64_t[]){53 * J, 6 * J}, (uint64_t[]){1 * J, 0}), 2);
	CHECK_U64(out[0].total_uj, 53 * J);
	CHECK_U64(out[0].energy_uj, 1 * J);
	/* A new count (estimd without its state), vm1 idle: it is at 0 in it. */
	CHECK_U64(slot("estimd", 8, 6, NULL, NULL), 2);
	CHECK_U64(out[0].total_uj, 0);
	CHECK_U64(out[0].energy_uj, 0);
	CHECK_U64(out[1].total_uj, 0);
	CHECK_U64(slot("estimd", 8, 7, (uint64_t[]){3 * J, 1 * J}, (uint64_t[]){3 * J, 1 * J}), 2);
	CHECK_U64(out[0].total_uj, 3 * J);
	CHECK_U64(out[0].energy_uj, 3 * J);
	/* The same total_epoch from another estimd is another count: its totals are not
	 * diffed with count 8's. */
	CHECK_U64(slot("estimd-b", 8, 8, (uint64_t[]){90 * J, 9 * J}, (uint64_t[]){2 * J, 0}), 2);
	CHECK_U64(out[0].total_uj, 90 * J);
	CHECK_U64(out[0].energy_uj, 2 * J);
	/* An estimate without totals (a stale slot) says nothing. */
	CHECK_U64(slot("estimd", 0, 9, NULL, NULL), 0);
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
