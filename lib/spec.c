/*
 * A processor's model name as Kepler's model server spells it in node types
 * (format_processor of kepler-model-server's train/profiler/node_type_index.py):
 * estimd sends this machine's, modeld files and matches trainers' and
 * requesters' by it, so both must spell it the same.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "spec.h"

static void remove_all(char *s, const char *word)
{
	size_t n = strlen(word);
	char *p;
	while ((p = strstr(s, word)))
		memmove(p, p + n, strlen(p + n) + 1);
}

/* Remove what the regular expression \d+-Bit Multi-Core matches. */
static void remove_bit_multicore(char *s)
{
	static const char tail[] = "-Bit Multi-Core";
	char *p;
	while ((p = strstr(s, tail))) {
		char *b = p;
		while (b > s && isdigit((unsigned char)b[-1]))
			b--;
		if (b == p) { /* no digits before it: not a match, and no other can start here */
			p[0] = ' ';
			continue;
		}
		memmove(b, p + sizeof(tail) - 1, strlen(p + sizeof(tail) - 1) + 1);
	}
}

/* Remove what \d+(\.\d+)?\s?[GMgm][Hh]z matches: "2.50GHz", "3 GHz". */
static void remove_clock(char *s)
{
	for (size_t i = 0; s[i];) {
		size_t j = i;
		if (!isdigit((unsigned char)s[j])) {
			i++;
			continue;
		}
		while (isdigit((unsigned char)s[j]))
			j++;
		if (s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
			j++;
			while (isdigit((unsigned char)s[j]))
				j++;
		}
		if (isspace((unsigned char)s[j]) && s[j + 1] && strchr("GMgm", s[j + 1]))
			j++;
		if (s[j] && strchr("GMgm", s[j]) && s[j + 1] && strchr("Hh", s[j + 1]) &&
		    s[j + 2] == 'z') {
			memmove(s + i, s + j + 3, strlen(s + j + 3) + 1);
			continue;
		}
		i++;
	}
}

/* Kepler's format_processor (kepler-model-server, train/profiler/node_type_index.py), step by step.
 */
void wb_processor_name(const char *model_name, char *out, size_t size)
{
	char s[256];
	if (size)
		out[0] = '\0';
	if (strlen(model_name) < 2) /* "-" on some machines */
		return;
	snprintf(s, sizeof(s), "%s", model_name);
	remove_all(s, "(R)");
	remove_all(s, "(r)");
	remove_all(s, "CPU");
	remove_all(s, "Processor");
	remove_all(s, "processor");
	remove_bit_multicore(s);
	s[strcspn(s, "(")] = '\0';
	s[strcspn(s, "[")] = '\0';
	remove_all(s, "@");
	remove_all(s, "\xc2\xae"); /* ® */
	remove_all(s, ",");
	remove_clock(s);
	/* words joined by _, - as _, lower case, then "_v" as "v" ("e5_2686_v4" -> "e5_2686v4") */
	size_t o = 0;
	bool gap = false;
	for (const char *p = s; *p && o + 1 < size; p++) {
		if (isspace((unsigned char)*p)) {
			gap = o > 0;
			continue;
		}
		if (gap && o + 2 < size)
			out[o++] = '_';
		gap = false;
		out[o++] = *p == '-' ? '_' : (char)tolower((unsigned char)*p);
	}
	if (size)
		out[o] = '\0';
	char *p;
	while ((p = strstr(out, "_v")))
		memmove(p, p + 1, strlen(p + 1) + 1);
}
