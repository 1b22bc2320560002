#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

int wb_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t min)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : min ? min : 1;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -1;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -1;
	void *p;
	memcpy(&p, pp, sizeof p); /* pp points to a T *, whatever T is */
	p = realloc(p, n * elem);
	if (!p)
		return -1;
	memcpy(pp, &p, sizeof p);
	*cap = n;
	return 0;
}
