/*
 * Exact integer attribution: an amount of microjoules split in proportion to
 * weights with largest-remainder rounding, so that the parts always add up to
 * the whole and no microjoule is made or lost in any slot.
 */
#include <stdlib.h>
#include <string.h>

#include "estimd.h"

struct attrib_rem {
	uint64_t rem;
	uint64_t idx;
};

void attrib_scratch_free(struct attrib_scratch *s)
{
	free(s->rem);
	s->rem = NULL;
	s->cap = 0;
}

static inline bool ranks_before(const struct attrib_rem *a, const struct attrib_rem *b)
{
	return a->rem > b->rem || (a->rem == b->rem && a->idx < b->idx);
}

static int cmp_rank(const void *pa, const void *pb)
{
	const struct attrib_rem *a = pa, *b = pb;
	return ranks_before(a, b) ? -1 : ranks_before(b, a) ? 1 : 0;
}

static inline void swap_rem(struct attrib_rem *a, struct attrib_rem *b)
{
	struct attrib_rem t = *a;
	*a = *b;
	*b = t;
}

/*
 * Reorder r[0..n) so that its first k entries are the k that rank first
 * (quickselect; the ranking is a strict order since indexes differ). Falls
 * back to sorting the open range when the pivots keep going badly.
 */
static void select_top(struct attrib_rem *r, size_t n, size_t k)
{
	size_t lo = 0, hi = n;
	int budget = 64;
	while (lo < k && k < hi && hi - lo > 1) {
		if (budget-- == 0) {
			qsort(r + lo, hi - lo, sizeof(*r), cmp_rank);
			return;
		}
		size_t mid = lo + (hi - lo) / 2;
		/* Median of three as pivot, parked at hi - 1. */
		if (ranks_before(&r[mid], &r[lo]))
			swap_rem(&r[mid], &r[lo]);
		if (ranks_before(&r[hi - 1], &r[lo]))
			swap_rem(&r[hi - 1], &r[lo]);
		if (ranks_before(&r[mid], &r[hi - 1]))
			swap_rem(&r[mid], &r[hi - 1]);
		struct attrib_rem pivot = r[hi - 1];
		size_t i = lo;
		for (size_t j = lo; j < hi - 1; j++)
			if (ranks_before(&r[j], &pivot))
				swap_rem(&r[i++], &r[j]);
		swap_rem(&r[i], &r[hi - 1]);
		if (i == k || i + 1 == k)
			return;
		if (k < i)
			hi = i;
		else
			lo = i + 1;
	}
}

typedef unsigned __int128 u128;

/* floor(amount * w / d) and the remainder, in 64 bits when the product fits. */
static inline uint64_t muldiv(uint64_t amount, uint64_t w, uint64_t d, uint64_t *rem)
{
	if (w == 0) {
		*rem = 0;
		return 0;
	}
	if (amount <= UINT64_MAX / w) {
		uint64_t p = amount * w;
		*rem = p % d;
		return p / d;
	}
	u128 p = (u128)amount * w;
	*rem = (uint64_t)(p % d);
	return (uint64_t)(p / d);
}

int attrib_split(uint64_t amount_uj, const uint64_t *w, size_t n, uint64_t denom, uint64_t *out,
		 uint64_t *rest_uj, struct attrib_scratch *s)
{
	u128 sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += w[i];
	/*
	 * Weights whose sum passes 2^64 (never seen in practice: 2^64 ns is 584
	 * years of CPU time) are scaled down together, which keeps the shares.
	 */
	unsigned shift = 0;
	u128 d = denom > sum ? denom : sum;
	while ((d >> shift) > UINT64_MAX)
		shift++;
	if (shift) {
		sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += w[i] >> shift;
		d = (u128)(denom >> shift) > sum ? (u128)(denom >> shift) : sum;
	}
	if (d == 0 || amount_uj == 0) {
		memset(out, 0, n * sizeof(*out));
		*rest_uj = amount_uj;
		return 0;
	}
	if (s->cap < n + 1) {
		size_t cap = n + 1 > 2 * s->cap ? n + 1 : 2 * s->cap;
		struct attrib_rem *r = realloc(s->rem, cap * sizeof(*r));
		if (!r)
			return -1;
		s->rem = r;
		s->cap = cap;
	}
	uint64_t D = (uint64_t)d;
	uint64_t given = 0;
	size_t nrem = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t rem;
		out[i] = muldiv(amount_uj, w[i] >> shift, D, &rem);
		given += out[i];
		if (rem)
			s->rem[nrem++] = (struct attrib_rem){rem, i};
	}
	uint64_t rest_rem;
	*rest_uj = muldiv(amount_uj, D - (uint64_t)sum, D, &rest_rem);
	given += *rest_uj;
	if (rest_rem)
		s->rem[nrem++] = (struct attrib_rem){rest_rem, n};
	/* The floors fall short by less than one microjoule per part with a remainder. */
	uint64_t left = amount_uj - given;
	if (left > nrem) {
		/* Cannot happen (the remainders sum to left * D); never write past the array. */
		*rest_uj += left - nrem;
		left = nrem;
	}
	select_top(s->rem, nrem, (size_t)left);
	for (size_t j = 0; j < left; j++) {
		if (s->rem[j].idx == n)
			(*rest_uj)++;
		else
			out[s->rem[j].idx]++;
	}
	return 0;
}
