/* Machine spec helpers shared by estimd (the client) and modeld (the server). */
#ifndef WB_SPEC_H
#define WB_SPEC_H

#include <stddef.h>

/*
 * "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz" -> "intel_xeon_e5_2686v4", as
 * Kepler's format_processor does it; an already formatted name stays as it is;
 * "" for a name shorter than 2 (the "-" of some machines).
 */
void wb_processor_name(const char *model_name, char *out, size_t size);

#endif
