/*
 * A wattbus verb's flags from its table (struct cli_flag): getopt_long's options, each value
 * read by lib/config's typed parser with the row's bounds, and the --help text, so a flag is
 * one row and its parsing, range check, message and help cannot disagree.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "config.h"

/* getopt_long's value for row i (above any letter). */
#define FLAG_VAL 1000

static struct wb_conf_key key_of(const struct cli_flag *f)
{
	return (struct wb_conf_key){
	    f->name, (enum wb_conf_type)f->type, f->off, f->def, f->min, f->max, NULL, f->help};
}

/* Set one flag from text. Returns 0, or -1 with the reason (without the flag's name) in why. */
static int set_flag(const struct cli_flag *f, void *opts, const char *text, char *why, size_t len)
{
	char *slot = (char *)opts + f->off;
	switch (f->type) {
	case WB_CONF_STR:
		*(const char **)slot = text;
		return 0;
	case WB_CONF_LIST: {
		struct cli_strs *l = (struct cli_strs *)slot;
		if (l->n == CLI_STRS_MAX) {
			snprintf(why, len, "given more than %d times", CLI_STRS_MAX);
			return -1;
		}
		l->v[l->n++] = text;
		return 0;
	}
	case WB_CONF_BOOL:
	case WB_CONF_INT:
	case WB_CONF_DURATION:
	case WB_CONF_DOUBLE: {
		struct wb_conf_key k = key_of(f);
		return wb_conf_parse(&k, opts, text, why, len);
	}
	}
	/* A programming error in the verb's table, said as plainly as a bad value. */
	snprintf(why, len, "flag type %d is not one a verb takes", f->type);
	return -1;
}

/* Defaults: the whole struct zero (NULL, false, 0, no list), then each row's def read as a flag
 * would be. */
static int set_defaults(const struct cli_verb *v, void *opts, char *err, size_t len)
{
	if (opts && v->size)
		memset(opts, 0, v->size);
	for (size_t i = 0; i < v->nflags; i++) {
		const struct cli_flag *f = &v->flags[i];
		char why[256];
		if (f->type == CLI_OPERAND_ROW)
			continue;
		if (f->def && set_flag(f, opts, f->def, why, sizeof(why)) < 0) {
			snprintf(err, len, "--%s: default '%s': %s", f->name, f->def, why);
			return -1;
		}
	}
	return 0;
}

int cli_usage_error(const struct cli_verb *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "wattbus %s: ", v->name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	cli_usage(v, stderr);
	return 2;
}

int cli_parse(const struct cli_verb *v, int argc, char **argv, void *opts, int *first)
{
	char err[512];
	if (set_defaults(v, opts, err, sizeof(err)) < 0) {
		fprintf(stderr, "wattbus %s: %s (programming error)\n", v->name, err);
		return 2;
	}
	struct option *lo = calloc(v->nflags + 2, sizeof(*lo));
	char *shorts = calloc(2 * v->nflags + 4, 1);
	if (!lo || !shorts) {
		free(lo);
		free(shorts);
		fprintf(stderr, "wattbus %s: out of memory\n", v->name);
		return 1;
	}
	/* ':' first: a missing value is told apart from an unknown flag. */
	size_t ns = 0;
	shorts[ns++] = ':';
	shorts[ns++] = 'h';
	size_t nlo = 0;
	for (size_t i = 0; i < v->nflags; i++) {
		const struct cli_flag *f = &v->flags[i];
		if (f->type == CLI_OPERAND_ROW)
			continue;
		int has_arg = f->type == WB_CONF_BOOL ? no_argument : required_argument;
		lo[nlo++] = (struct option){f->name, has_arg, NULL, FLAG_VAL + (int)i};
		if (f->letter) {
			shorts[ns++] = f->letter;
			if (has_arg == required_argument)
				shorts[ns++] = ':';
		}
	}
	lo[nlo] = (struct option){"help", no_argument, NULL, 'h'};
	int rc = -1, c;
	opterr = 0;
	optind = 0; /* glibc: start afresh (a unit test parses more than once) */
	while (rc < 0 && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct cli_flag *f = NULL;
		if (c >= FLAG_VAL && c < FLAG_VAL + (int)v->nflags)
			f = &v->flags[c - FLAG_VAL];
		for (size_t i = 0; !f && c > 0 && c < FLAG_VAL && i < v->nflags; i++)
			if (v->flags[i].letter == c && v->flags[i].type != CLI_OPERAND_ROW)
				f = &v->flags[i];
		if (c == 'h' && !f) {
			cli_usage(v, stdout);
			rc = 0;
		} else if (c == ':') {
			rc = cli_usage_error(v, "%s needs a value", argv[optind - 1]);
		} else if (!f) {
			rc = cli_usage_error(v, "unknown option '%s' (see --help)",
					     argv[optind - 1]);
		} else if (f->type == WB_CONF_BOOL) {
			*(bool *)((char *)opts + f->off) = true;
		} else if (set_flag(f, opts, optarg, err, sizeof(err)) < 0) {
			fprintf(stderr, "wattbus %s: --%s: %s\n", v->name, f->name, err);
			rc = 2;
		}
	}
	free(lo);
	free(shorts);
	if (rc >= 0)
		return rc;
	int nargs = argc - optind;
	if (v->max_args >= 0 && nargs > v->max_args)
		return cli_usage_error(v, "unexpected argument '%s'", argv[optind + v->max_args]);
	if (nargs < v->min_args)
		return cli_usage_error(v, "%d operand%s given, %d needed", nargs,
				       nargs == 1 ? "" : "s", v->min_args);
	*first = optind;
	return -1;
}

/* " (1 to 1000)", " (at least 1)", " (1ms to 1m)": the bounds the parser holds the value to. */
static void range_text(const struct cli_flag *f, char *buf, size_t len)
{
	buf[0] = '\0';
	if (f->min == f->max)
		return;
	if (f->type == WB_CONF_INT && f->max >= (double)INT64_MAX)
		snprintf(buf, len, " (at least %.0f)", f->min);
	else if (f->type == WB_CONF_INT)
		snprintf(buf, len, " (%.0f to %.0f)", f->min, f->max);
	else if (f->type == WB_CONF_DOUBLE)
		snprintf(buf, len, " (%g to %g)", f->min, f->max);
	else if (f->type == WB_CONF_DURATION) {
		char lo[32], hi[32];
		wb_format_duration((uint64_t)f->min, lo, sizeof(lo));
		wb_format_duration((uint64_t)f->max, hi, sizeof(hi));
		snprintf(buf, len, " (%s to %s)", lo, hi);
	}
}

void cli_usage(const struct cli_verb *v, FILE *out)
{
	fprintf(out, "usage: wattbus %s ", v->name);
	/* A further form of the synopsis starts a line of its own, aligned under the first. */
	for (const char *p = v->synopsis; *p; p++) {
		fputc(*p, out);
		if (*p == '\n')
			fprintf(out, "       wattbus %s ", v->name);
	}
	fputc('\n', out);
	/* The operands first, a help that goes on over lines in the help column. */
	for (size_t i = 0; i < v->nflags; i++) {
		const struct cli_flag *f = &v->flags[i];
		for (const char *p = f->help, *name = f->name; f->type == CLI_OPERAND_ROW && *p;
		     name = "") {
			size_t n = strcspn(p, "\n");
			fprintf(out, "  %-24s %.*s\n", name, (int)n, p);
			p += n + (p[n] == '\n');
		}
	}
	for (size_t i = 0; i < v->nflags; i++) {
		const struct cli_flag *f = &v->flags[i];
		char head[64], range[96];
		if (f->type == CLI_OPERAND_ROW)
			continue;
		snprintf(head, sizeof(head), "%c%c%c --%s%s%s", f->letter ? '-' : ' ',
			 f->letter ? f->letter : ' ', f->letter ? ',' : ' ', f->name,
			 f->arg ? " " : "", f->arg ? f->arg : "");
		range_text(f, range, sizeof(range));
		fprintf(out, "  %-24s %s%s", head, f->help, range);
		if (f->def && f->def[0])
			fprintf(out, " [default %s]", f->def);
		if (f->type == WB_CONF_LIST)
			fprintf(out, " (repeatable)");
		fputc('\n', out);
	}
	fprintf(out, "  %-24s %s\n", "-h, --help", "this text");
	if (v->notes)
		fputs(v->notes, out);
}
