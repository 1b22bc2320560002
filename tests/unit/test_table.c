/*
 * lib/table.c: the one open-addressing table. Collisions and runs across the
 * end of the array, backward-shift deletion, sweeps, the budget, growth and
 * shrinking, iteration, one-key tables, keys that are a hash (several entries
 * with one key, told apart by the caller), clearing.
 */
#include <string.h>

#include "../../lib/hash.h"
#include "../../lib/table.h"
#include "unit.h"

struct item {
	uint64_t a, b; /* the key */
	uint32_t val;
	bool used;
};

static void init(struct wb_table *t, size_t min_cap, size_t max)
{
	wb_table_init(t, sizeof(struct item), offsetof(struct item, a), 2,
		      offsetof(struct item, used), min_cap, max);
}

static size_t pos(const struct wb_table *t, const void *e)
{
	return (size_t)((const struct item *)e - (const struct item *)t->slots);
}

static size_t home(const struct wb_table *t, uint64_t a, uint64_t b)
{
	return (size_t)wb_hash2(a, b) & (t->cap - 1);
}

/* Every entry is reachable from its home without crossing an empty slot. */
static bool runs_intact(const struct wb_table *t)
{
	const struct item *s = t->slots;
	size_t n = 0;
	for (size_t i = 0; i < t->cap; i++) {
		if (!s[i].used)
			continue;
		n++;
		for (size_t j = home(t, s[i].a, s[i].b); j != i; j = (j + 1) & (t->cap - 1))
			if (!s[j].used)
				return false;
	}
	return n == t->n;
}

/* n keys (a, 0) whose home in a table of cap slots is want. */
static void keys_at(size_t cap, size_t want, uint64_t *out, size_t n)
{
	for (uint64_t a = 1, found = 0; found < n; a++)
		if (((size_t)wb_hash2(a, 0) & (cap - 1)) == want)
			out[found++] = a;
}

static void collisions_and_backward_shift(void)
{
	struct wb_table t;
	init(&t, 16, 100);
	uint64_t k[4];
	keys_at(16, 5, k, 4);
	for (size_t i = 0; i < 4; i++) {
		struct item *e = wb_table_insert(&t, k[i], 0);
		CHECK(e && e->a == k[i] && e->b == 0 && e->val == 0);
		e->val = (uint32_t)i;
	}
	CHECK_U64(t.cap, 16);
	for (size_t i = 0; i < 4; i++)
		CHECK_U64(pos(&t, wb_table_find(&t, k[i], 0)), 5 + i);
	CHECK(wb_table_find(&t, k[0], 1) == NULL); /* same a, other b: another key */
	wb_table_remove(&t, wb_table_find(&t, k[1], 0));
	CHECK(wb_table_find(&t, k[1], 0) == NULL);
	/* the run moved back by one: no hole between a key and its home */
	CHECK_U64(pos(&t, wb_table_find(&t, k[2], 0)), 6);
	CHECK_U64(pos(&t, wb_table_find(&t, k[3], 0)), 7);
	CHECK_U64(((struct item *)wb_table_find(&t, k[3], 0))->val, 3);
	CHECK(!((struct item *)t.slots)[8].used);
	CHECK_U64(t.n, 3);
	CHECK(runs_intact(&t));
	wb_table_free(&t);
}

static void run_across_the_end(void)
{
	struct wb_table t;
	init(&t, 16, 100);
	uint64_t last[3], first[1];
	keys_at(16, 15, last, 3);
	keys_at(16, 0, first, 1);
	for (size_t i = 0; i < 3; i++)
		((struct item *)wb_table_insert(&t, last[i], 0))->val = (uint32_t)i;
	((struct item *)wb_table_insert(&t, first[0], 0))->val = 9; /* home 0, lands at 2 */
	CHECK_U64(pos(&t, wb_table_find(&t, last[1], 0)), 0);
	CHECK_U64(pos(&t, wb_table_find(&t, last[2], 0)), 1);
	CHECK_U64(pos(&t, wb_table_find(&t, first[0], 0)), 2);
	wb_table_remove(&t, wb_table_find(&t, last[0], 0));
	CHECK_U64(pos(&t, wb_table_find(&t, last[1], 0)), 15); /* pulled back across the end */
	CHECK_U64(pos(&t, wb_table_find(&t, last[2], 0)), 0);
	CHECK_U64(pos(&t, wb_table_find(&t, first[0], 0)), 1);
	CHECK_U64(((struct item *)wb_table_find(&t, first[0], 0))->val, 9);
	CHECK(runs_intact(&t));
	/* a key at home stays: removing one before it at the end moves nothing past it */
	wb_table_remove(&t, wb_table_find(&t, last[1], 0));
	CHECK_U64(pos(&t, wb_table_find(&t, last[2], 0)), 15);
	CHECK_U64(pos(&t, wb_table_find(&t, first[0], 0)), 0);
	CHECK(runs_intact(&t));
	wb_table_free(&t);
}

/* Random inserts and removals checked against a plain array. */
static void churn_matches_reference(void)
{
	enum { NKEYS = 3000 };
	static bool in[NKEYS];
	struct wb_table t;
	init(&t, 8, NKEYS);
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < 100000; round++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t k = x % NKEYS;
		struct item *e = wb_table_find(&t, k % 100, k / 100);
		CHECK((e != NULL) == in[k]);
		if (e) {
			CHECK_U64(e->val, k);
			wb_table_remove(&t, e);
		} else {
			e = wb_table_insert(&t, k % 100, k / 100);
			CHECK(e != NULL);
			e->val = (uint32_t)k;
		}
		in[k] = !in[k];
		CHECK(t.n * 2 <= t.cap);
	}
	CHECK(runs_intact(&t));
	size_t n = 0, seen = 0;
	for (uint64_t k = 0; k < NKEYS; k++)
		n += in[k];
	for (struct item *e = wb_table_next(&t, NULL); e; e = wb_table_next(&t, e)) {
		CHECK(in[e->val] && e->a == e->val % 100 && e->b == e->val / 100);
		seen++;
	}
	CHECK_U64(seen, n);
	CHECK_U64(t.n, n);
	wb_table_free(&t);
}

static bool even(void *arg, const void *entry)
{
	(*(int *)arg)++;
	return ((const struct item *)entry)->val % 2 == 0;
}

static void sweep_growth_and_shrink(void)
{
	struct wb_table t;
	init(&t, 8, 1000);
	CHECK_U64(wb_table_bytes_for(&t, 3), 8 * sizeof(struct item));
	CHECK_U64(wb_table_bytes_for(&t, 100), 256 * sizeof(struct item));
	CHECK_U64(wb_table_bytes_for(&t, 5000), 2048 * sizeof(struct item)); /* max 1000 */
	for (uint32_t i = 0; i < 100; i++) {
		size_t before = wb_table_bytes_for(&t, 1);
		((struct item *)wb_table_insert(&t, i, 7))->val = i;
		CHECK_U64(wb_table_bytes(&t), before);
	}
	CHECK_U64(t.cap, 256);
	int calls = 0;
	CHECK_U64(wb_table_sweep(&t, even, &calls), 50);
	CHECK_U64(calls, 100);
	CHECK_U64(t.n, 50);
	CHECK_U64(t.cap, 256); /* 50 of 256: not mostly empty */
	CHECK(wb_table_find(&t, 4, 7) && !wb_table_find(&t, 5, 7));
	for (uint32_t i = 0; i < 100; i += 2)
		if (i != 40)
			wb_table_remove(&t, wb_table_find(&t, i, 7));
	CHECK_U64(t.n, 1);
	CHECK_U64(wb_table_sweep(&t, even, &calls), 0);
	CHECK_U64(t.cap, 8); /* shrunk to min_cap */
	CHECK(wb_table_find(&t, 40, 7) && ((struct item *)wb_table_find(&t, 40, 7))->val == 40);
	CHECK(runs_intact(&t));
	wb_table_free(&t);
	CHECK(t.slots == NULL && t.cap == 0 && t.n == 0);
	CHECK(wb_table_insert(&t, 1, 1) != NULL); /* still usable */
	wb_table_free(&t);
}

static void max_and_budget(void)
{
	struct wb_budget budget = {.max = 16 * sizeof(struct item)};
	struct wb_table t;
	init(&t, 8, 3);
	t.budget = &budget;
	for (uint64_t i = 0; i < 3; i++)
		CHECK(wb_table_insert(&t, i, 0) != NULL);
	CHECK(wb_table_insert(&t, 3, 0) == NULL); /* max 3 */
	CHECK_U64(budget.used, 8 * sizeof(struct item));
	t.max = 100;
	for (uint64_t i = 3; i < 8; i++)
		CHECK(wb_table_insert(&t, i, 0) != NULL); /* grew to 16: the whole budget */
	CHECK_U64(budget.used, 16 * sizeof(struct item));
	CHECK(wb_table_insert(&t, 8, 0) == NULL); /* 32 slots do not fit */
	CHECK_U64(t.n, 8);
	CHECK_U64(budget.used, 16 * sizeof(struct item));
	for (uint64_t i = 0; i < 8; i++)
		CHECK(wb_table_find(&t, i, 0) != NULL); /* refused growth lost nothing */
	wb_table_free(&t);
	CHECK_U64(budget.used, 0);
}

struct one {
	uint32_t gen;
	bool used;
	uint64_t id;
};

static void one_key(void)
{
	struct wb_table t;
	wb_table_init(&t, sizeof(struct one), offsetof(struct one, id), 1,
		      offsetof(struct one, used), 4, 10);
	struct one *e = wb_table_insert(&t, 42, 99); /* k2 is not part of the key */
	CHECK(e && e->id == 42);
	CHECK(wb_table_find(&t, 42, 0) == e && wb_table_find(&t, 42, 5) == e);
	CHECK(wb_table_find(&t, 43, 0) == NULL);
	wb_table_free(&t);
}

/*
 * Names keyed by a hash, as a caller keyed by strings does: names[e->val] is the
 * entry's name. hash_of decides the hash, so that a test can make names collide.
 */
static const char *const names[] = {"ab", "cd", "ef", "gh", "xyz", "uvw"};

static struct item *name_find(const struct wb_table *t, uint64_t (*hash_of)(const char *),
			      const char *name)
{
	for (struct item *e = wb_table_find(t, hash_of(name), 0); e; e = wb_table_find_next(t, e))
		if (strcmp(names[e->val], name) == 0)
			return e;
	return NULL;
}

static struct item *name_insert(struct wb_table *t, uint64_t (*hash_of)(const char *), uint32_t i)
{
	struct item *e = wb_table_insert(t, hash_of(names[i]), 0);
	if (e)
		e->val = i;
	return e;
}

/* Every name of one length has one hash: "ab", "cd", "ef", "gh" collide, "xyz", "uvw" too. */
static uint64_t by_length(const char *s)
{
	return strlen(s);
}

static uint64_t by_fnv(const char *s)
{
	return wb_hash_str(s);
}

static void hash_keys_that_collide(void)
{
	struct wb_table t;
	init(&t, 16, 100);
	for (uint32_t i = 0; i < 6; i++)
		CHECK(name_insert(&t, by_length, i) != NULL);
	CHECK_U64(t.n, 6);
	/* the first entry of hash 2 is "ab": a lookup that did not compare names would get it */
	for (uint32_t i = 0; i < 6; i++) {
		struct item *e = name_find(&t, by_length, names[i]);
		CHECK(e && e->val == i);
	}
	CHECK(name_find(&t, by_length, "zz") == NULL);	 /* a hash present, no such name */
	CHECK(name_find(&t, by_length, "zzzz") == NULL); /* a hash absent */
	/* find_next visits exactly the entries of the key, none of another */
	size_t seen = 0;
	for (struct item *e = wb_table_find(&t, 2, 0); e; e = wb_table_find_next(&t, e)) {
		CHECK(e->a == 2 && strlen(names[e->val]) == 2);
		seen++;
	}
	CHECK_U64(seen, 4);
	CHECK(runs_intact(&t));
	wb_table_free(&t);
}

/* Keys of other hashes inside the run of one, and the run across the end of the array. */
static void hash_keys_in_a_shared_run(void)
{
	struct wb_table t;
	init(&t, 16, 100);
	uint64_t other[2];
	keys_at(16, 15, other, 2);
	/* hash 15's "names": a table keyed by a constant hash, entries 0..3 */
	uint64_t h = other[0];
	struct item *e = wb_table_insert(&t, h, 0);
	e->val = 0;
	e = wb_table_insert(&t, other[1], 0); /* another key, same home: between them */
	e->val = 100;
	for (uint32_t i = 1; i < 4; i++)
		((struct item *)wb_table_insert(&t, h, 0))->val = i;
	/* slots 15, 0, 1, 2, 3: h, other, h, h, h */
	CHECK_U64(pos(&t, wb_table_find(&t, other[1], 0)), 0);
	uint32_t order[5], n = 0;
	for (e = wb_table_find(&t, h, 0); e && n < 5; e = wb_table_find_next(&t, e))
		order[n++] = e->val;
	CHECK_U64(n, 4);
	for (uint32_t i = 0; i < 4; i++)
		CHECK_U64(order[i], i);
	CHECK(wb_table_find_next(&t, wb_table_find(&t, other[1], 0)) == NULL);
	wb_table_free(&t);
}

static void remove_within_a_collision_run(void)
{
	struct wb_table t;
	init(&t, 16, 100);
	for (uint32_t i = 0; i < 6; i++)
		name_insert(&t, by_length, i);
	wb_table_remove(&t, name_find(&t, by_length, "cd")); /* the middle of hash 2's entries */
	CHECK(name_find(&t, by_length, "cd") == NULL);
	CHECK(runs_intact(&t));
	const char *left[] = {"ab", "ef", "gh", "xyz", "uvw"};
	for (size_t i = 0; i < 5; i++) {
		struct item *e = name_find(&t, by_length, left[i]);
		CHECK(e && strcmp(names[e->val], left[i]) == 0);
	}
	wb_table_remove(&t, name_find(&t, by_length, "ab")); /* the first: at the home */
	wb_table_remove(&t, name_find(&t, by_length, "xyz"));
	CHECK(runs_intact(&t));
	CHECK(name_find(&t, by_length, "ab") == NULL && name_find(&t, by_length, "xyz") == NULL);
	CHECK(name_find(&t, by_length, "ef") && name_find(&t, by_length, "gh"));
	CHECK(name_find(&t, by_length, "uvw"));
	CHECK_U64(t.n, 3);
	/* the name comes back as a new entry */
	CHECK(name_insert(&t, by_length, 1) && name_find(&t, by_length, "cd")->val == 1);
	CHECK(runs_intact(&t));
	wb_table_free(&t);
}

/* Random names with a real string hash, and forced collisions, against a reference. */
static void hash_keys_churn(void)
{
	enum { NNAMES = 500 };
	static char buf[NNAMES][16];
	static bool in[NNAMES];
	struct wb_table t;
	init(&t, 8, NNAMES);
	for (int i = 0; i < NNAMES; i++)
		snprintf(buf[i], sizeof buf[i], "n%d", i);
	uint64_t x = 2463534242ull;
	for (int round = 0; round < 40000; round++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t k = (uint32_t)(x % NNAMES);
		/* one name in three hashes to 7: long runs of one key */
		uint64_t h = k % 3 ? wb_hash_str(buf[k]) : 7;
		struct item *e = wb_table_find(&t, h, 0);
		while (e && e->val != k)
			e = wb_table_find_next(&t, e);
		CHECK((e != NULL) == in[k]);
		if (e) {
			wb_table_remove(&t, e);
		} else {
			e = wb_table_insert(&t, h, 0);
			CHECK(e != NULL);
			e->val = k;
		}
		in[k] = !in[k];
	}
	CHECK(runs_intact(&t));
	size_t n = 0;
	for (int i = 0; i < NNAMES; i++)
		n += in[i];
	CHECK_U64(t.n, n);
	wb_table_free(&t);
}

static void hash_keys_budget_and_clear(void)
{
	struct wb_budget budget = {.max = 16 * sizeof(struct item)};
	struct wb_table t;
	init(&t, 8, 100);
	t.budget = &budget;
	/* one key eight times: each a new entry, charged as any other */
	for (uint32_t i = 0; i < 8; i++) {
		struct item *e = wb_table_insert(&t, 42, 0);
		CHECK(e != NULL);
		e->val = i;
	}
	CHECK_U64(t.n, 8);
	CHECK_U64(t.cap, 16);
	CHECK_U64(budget.used, 16 * sizeof(struct item));
	CHECK(wb_table_insert(&t, 42, 0) == NULL); /* 32 slots do not fit the budget */
	unsigned seen = 0;
	for (struct item *e = wb_table_find(&t, 42, 0); e; e = wb_table_find_next(&t, e))
		seen |= 1u << e->val;
	CHECK_U64(seen, 0xff); /* every one, none lost by the refusal */
	wb_table_clear(&t);
	CHECK_U64(t.n, 0);
	CHECK(wb_table_find(&t, 42, 0) == NULL && wb_table_next(&t, NULL) == NULL);
	CHECK_U64(budget.used, 16 * sizeof(struct item)); /* the slots are kept, still charged */
	CHECK(name_insert(&t, by_fnv, 4) && name_find(&t, by_fnv, "xyz"));
	CHECK(name_find(&t, by_fnv, "uvw") == NULL);
	wb_table_free(&t);
	CHECK_U64(budget.used, 0);
	wb_table_clear(&t); /* an empty table with no slots */
	CHECK(t.slots == NULL && t.n == 0);
}

static const struct unit_case cases[] = {
    {"collisions and backward-shift deletion", collisions_and_backward_shift},
    {"a run across the end of the array", run_across_the_end},
    {"random inserts and removals agree with a reference", churn_matches_reference},
    {"sweep, growth and shrink", sweep_growth_and_shrink},
    {"max entries and the budget", max_and_budget},
    {"a table keyed by one uint64_t", one_key},
    {"keys that are a hash: colliding names told apart", hash_keys_that_collide},
    {"keys that are a hash: other keys inside the run", hash_keys_in_a_shared_run},
    {"keys that are a hash: removal within a collision run", remove_within_a_collision_run},
    {"keys that are a hash: random names against a reference", hash_keys_churn},
    {"keys that are a hash: the budget, and clearing", hash_keys_budget_and_clear},
};

UNIT_MAIN(cases)
