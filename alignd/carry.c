/*
 * Integer slot energies with the rounding remainder carried forward: each slot
 * gets floor(E(t1)) minus what earlier slots were given, so the fraction left
 * at a boundary lands in the next slot and the sum over any run is exact.
 */
#include "alignd.h"

void carry_set(struct carry *c, uint64_t curve_id, uint64_t base_uj, bool extrapolated)
{
	c->curve_id = curve_id;
	c->emitted_uj = base_uj;
	c->ahead = extrapolated;
}

uint64_t carry_take(struct carry *c, uint64_t target_uj, bool extrapolated)
{
	/*
	 * Below what was handed out only after an extrapolation overshot: this slot
	 * gets nothing and the excess is absorbed by the next slots, never paid
	 * back as negative energy.
	 */
	if (target_uj < c->emitted_uj)
		return 0;
	uint64_t e_uj = target_uj - c->emitted_uj;
	c->emitted_uj = target_uj;
	c->ahead = extrapolated;
	return e_uj;
}
