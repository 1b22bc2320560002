/* lib/grow.h: the growable array every table and list of the stages uses. */
#include <stdint.h>
#include <stdlib.h>

#include "grow.h"
#include "unit.h"

static void test_doubling(void)
{
	uint32_t *a = NULL;
	size_t cap = 0;
	/* from nothing: min, then doubled until need fits */
	CHECK(wb_grow(&a, &cap, 1, sizeof *a, 4) == 0 && a && cap == 4);
	for (uint32_t i = 0; i < 4; i++)
		a[i] = i;
	CHECK(wb_grow(&a, &cap, 4, sizeof *a, 4) == 0 && cap == 4); /* fits: nothing moves */
	CHECK(wb_grow(&a, &cap, 5, sizeof *a, 4) == 0 && cap == 8);
	CHECK(wb_grow(&a, &cap, 33, sizeof *a, 4) == 0 && cap == 64);
	for (uint32_t i = 0; i < 4; i++)
		CHECK(a[i] == i); /* the content stays */
	free(a);
}

static void test_overflow(void)
{
	char *p = NULL;
	size_t cap = 0;
	CHECK(wb_grow(&p, &cap, 10, 1, 0) == 0 && cap == 16); /* min 0: from 1 */
	p[15] = 'x';
	char *before = p;
	/* more elements than a size_t can count in bytes: refused, the array unchanged */
	CHECK(wb_grow(&p, &cap, SIZE_MAX / 8 + 2, 8, 16) == -1);
	CHECK(p == before && cap == 16 && p[15] == 'x');
	CHECK(wb_grow(&p, &cap, SIZE_MAX, 1, 16) == -1);
	CHECK(p == before && cap == 16);
	free(p);
}

static const struct unit_case cases[] = {
    {"doubling from min, content kept", test_doubling},
    {"sizes that overflow are refused", test_overflow},
};
UNIT_MAIN(cases)
