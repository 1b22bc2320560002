/*
 * The INI config file, read with inih. Every section is described by a key
 * table, so the file, the defaults and the command-line flags all go through
 * the same typed setter and report errors the same way.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "clock.h"
#include "codec.h"
#include "config.h"

/* The stages' sections, and `wattbus vmpub`'s, which runs on the same daemon framework. */
const char *const wb_conf_known_sections[] = {"global",	 "powerd", "usaged", "alignd", "estimd",
					      "exportd", "modeld", "vmpub",  NULL};

static void strlist_clear(struct wb_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int strlist_push(struct wb_strlist *l, const char *s, size_t len)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v)
		return -1;
	l->v = v;
	v[l->n] = strndup(s, len);
	if (!v[l->n])
		return -1;
	l->n++;
	return 0;
}

/* Split "a, b,c" into items, trimming blanks; empty items are dropped. */
static int strlist_parse(struct wb_strlist *l, const char *text)
{
	strlist_clear(l);
	const char *p = text;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *start = p;
		while (*p && *p != ',')
			p++;
		const char *end = p;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end > start && strlist_push(l, start, (size_t)(end - start)) < 0)
			return -1;
	}
	return 0;
}

static bool in_choices(const char *choices, const char *value)
{
	size_t len = strlen(value);
	const char *p = choices;
	while (p && *p) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);
		if (n == len && strncmp(p, value, n) == 0)
			return true;
		p = bar ? bar + 1 : NULL;
	}
	return false;
}

/* What the codec accepts in a string, less control characters (a host name goes in topics and
 * logs). */
static const char *utf8_problem(const char *value)
{
	const unsigned char *p = (const unsigned char *)value;
	size_t n = strlen(value);
	for (size_t i = 0; i < n;) {
		size_t len = wb_utf8_seq_len(p + i, n - i);
		if (!len)
			return "is not valid UTF-8";
		if (wb_utf8_is_control(p + i, len)) /* C0, DEL, C1: as the codec's names */
			return "holds a control character";
		i += len;
	}
	return NULL;
}

/* A shell pattern fnmatch reads as written: brackets closed, no dangling backslash. */
static const char *glob_problem(const char *pat)
{
	if (!pat[0])
		return "is empty";
	for (const char *p = pat; *p; p++) {
		if (*p == '\\') {
			if (!*++p)
				return "ends in a backslash";
		} else if (*p == '[') {
			const char *q = p + 1;
			if (*q == '!' || *q == '^')
				q++;
			if (*q == ']')
				q++; /* a leading ] is a member */
			while (*q && *q != ']')
				q++;
			if (!*q)
				return "has a [ without its ]";
			p = q;
		}
	}
	return NULL;
}

static bool bounded(const struct wb_conf_key *k)
{
	return k->min != k->max;
}

/*
 * A number as a person writes it in decimal: a digit or a sign first (strto* would skip
 * blanks), no 0x prefix (strtoll's base 0 and strtod take hexadecimal, and base 0 reads
 * 010 as 8): a config means the same to wattbus and to whoever reads it.
 */
static bool decimal_text(const char *text)
{
	const char *p = text[0] == '-' || text[0] == '+' ? text + 1 : text;
	return (isdigit((unsigned char)p[0]) || p[0] == '.') && !strpbrk(text, "xX");
}

int wb_parse_int(const char *text, int64_t *v)
{
	char *end;
	if (!decimal_text(text))
		return -1;
	errno = 0;
	long long r = strtoll(text, &end, 10);
	if (end == text || *end || errno)
		return -1;
	*v = r;
	return 0;
}

int wb_parse_double(const char *text, double *v)
{
	char *end;
	if (!decimal_text(text))
		return -1;
	errno = 0;
	double r = strtod(text, &end);
	if (end == text || *end || errno || !isfinite(r))
		return -1;
	*v = r;
	return 0;
}

int wb_conf_parse(const struct wb_conf_key *k, void *dst, const char *value, char *err,
		  size_t errlen)
{
	char *slot = (char *)dst + k->off;
	switch (WB_CONF_TYPE(k)) {
	case WB_CONF_STR:
	case WB_CONF_UTF8:
	case WB_CONF_ENUM: {
		if (WB_CONF_TYPE(k) == WB_CONF_ENUM && !in_choices(k->choices, value)) {
			snprintf(err, errlen, "'%s' is not one of %s", value, k->choices);
			return -1;
		}
		const char *why = WB_CONF_TYPE(k) == WB_CONF_UTF8 ? utf8_problem(value) : NULL;
		if (why) {
			snprintf(err, errlen, "'%s' %s", value, why);
			return -1;
		}
		char *copy = strdup(value);
		if (!copy) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		free(*(char **)slot);
		*(char **)slot = copy;
		return 0;
	}
	case WB_CONF_LIST:
	case WB_CONF_GLOBS: {
		struct wb_strlist *l = (struct wb_strlist *)slot;
		if (strlist_parse(l, value) < 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (size_t i = 0; WB_CONF_TYPE(k) == WB_CONF_GLOBS && i < l->n; i++) {
			const char *why = glob_problem(l->v[i]);
			if (why) {
				snprintf(err, errlen, "pattern '%s' %s", l->v[i], why);
				strlist_clear(l);
				return -1;
			}
		}
		return 0;
	}
	case WB_CONF_INT: {
		int64_t v;
		if (wb_parse_int(value, &v) < 0) {
			snprintf(err, errlen, "'%s' is not a decimal integer", value);
			return -1;
		}
		if (bounded(k) && (v < k->min || v > k->max)) {
			/* A bound of INT64_MAX is no bound a person would read as one. */
			if (k->max >= (double)INT64_MAX)
				snprintf(err, errlen, "%lld is below %.0f", (long long)v, k->min);
			else
				snprintf(err, errlen, "%lld is outside [%.0f, %.0f]", (long long)v,
					 k->min, k->max);
			return -1;
		}
		*(int64_t *)slot = v;
		return 0;
	}
	case WB_CONF_DURATION: {
		uint64_t ns;
		if (wb_parse_duration(value, &ns) < 0) {
			snprintf(err, errlen, "'%s' is not a duration (e.g. 1s, 250ms, 2m)", value);
			return -1;
		}
		bool off = ns == 0 && (k->type & WB_CONF_OFF0);
		if (bounded(k) && !off && ((double)ns < k->min || (double)ns > k->max)) {
			char lo[32], hi[32];
			wb_format_duration((uint64_t)k->min, lo, sizeof(lo));
			wb_format_duration((uint64_t)k->max, hi, sizeof(hi));
			snprintf(err, errlen, "%s is outside [%s, %s]%s", value, lo, hi,
				 k->type & WB_CONF_OFF0 ? " (or 0: off)" : "");
			return -1;
		}
		*(uint64_t *)slot = ns;
		return 0;
	}
	case WB_CONF_BOOL: {
		static const char *const yes[] = {"true", "yes", "on", "1"};
		static const char *const no[] = {"false", "no", "off", "0"};
		for (size_t i = 0; i < 4; i++) {
			if (strcasecmp(value, yes[i]) == 0) {
				*(bool *)slot = true;
				return 0;
			}
			if (strcasecmp(value, no[i]) == 0) {
				*(bool *)slot = false;
				return 0;
			}
		}
		snprintf(err, errlen, "'%s' is not a boolean (true/false, yes/no, on/off, 1/0)",
			 value);
		return -1;
	}
	case WB_CONF_DOUBLE: {
		double v;
		if (wb_parse_double(value, &v) < 0) {
			snprintf(err, errlen, "'%s' is not a decimal number", value);
			return -1;
		}
		if (bounded(k) && (v < k->min || v > k->max)) {
			snprintf(err, errlen, "%g is outside [%g, %g]", v, k->min, k->max);
			return -1;
		}
		*(double *)slot = v;
		return 0;
	}
	}
	snprintf(err, errlen, "key type %d unknown", (int)WB_CONF_TYPE(k));
	return -1;
}

int wb_conf_compose(const struct wb_conf_part *parts, size_t nparts, struct wb_conf_key *out,
		    size_t max, size_t *offs, size_t *size, char *err, size_t errlen)
{
	const size_t align = _Alignof(max_align_t);
	size_t n = 0, at = 0;
	for (size_t p = 0; p < nparts; p++) {
		at = (at + align - 1) / align * align;
		offs[p] = at;
		for (size_t i = 0; i < parts[p].nkeys; i++) {
			const struct wb_conf_key *k = &parts[p].keys[i];
			for (size_t j = 0; j < n; j++)
				if (!strcmp(out[j].name, k->name)) {
					snprintf(err, errlen, "key %s is given twice", k->name);
					return -1;
				}
			if (n >= max) {
				snprintf(err, errlen, "more than %zu keys", max);
				return -1;
			}
			out[n] = *k;
			out[n++].off = at + k->off;
		}
		at += parts[p].size;
	}
	*size = at ? at : 1;
	return (int)n;
}

const struct wb_conf_key *wb_conf_find(const struct wb_conf_section *sec, const char *key)
{
	for (size_t i = 0; i < sec->nkeys; i++)
		if (strcmp(sec->keys[i].name, key) == 0)
			return &sec->keys[i];
	return NULL;
}

int wb_conf_set(const struct wb_conf_section *sec, const char *key, const char *value,
		const char *origin, char *err, size_t errlen)
{
	const struct wb_conf_key *k = wb_conf_find(sec, key);
	if (!k) {
		snprintf(err, errlen, "%s: unknown key '%s' in [%s]", origin, key, sec->name);
		return -1;
	}
	char why[256];
	if (wb_conf_parse(k, sec->dst, value, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: [%s] %s: %s", origin, sec->name, key, why);
		return -1;
	}
	return 0;
}

#define ENV_PREFIX "WATTBUS_"

/* "EXPORTD_" for section exportd: does name start with the section's upper-case name and '_'? */
static const char *after_section(const char *name, const char *section)
{
	for (; *section; section++, name++)
		if (*name != toupper((unsigned char)*section))
			return NULL;
	return *name == '_' ? name + 1 : NULL;
}

int wb_conf_env(const struct wb_conf_section *secs, size_t nsecs, char *const *envp,
		wb_conf_env_fn *fn, void *arg, char *err, size_t errlen)
{
	int set = 0;
	for (char *const *e = envp; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) != 0)
			continue;
		char var[256];
		if ((size_t)(eq - *e) >= sizeof(var))
			continue; /* longer than any key's name */
		snprintf(var, sizeof(var), "%.*s", (int)(eq - *e), *e);
		for (size_t s = 0; s < nsecs; s++) {
			const char *rest = after_section(var + strlen(ENV_PREFIX), secs[s].name);
			if (!rest || !*rest)
				continue;
			/* Key names are lower case; the variable spells them in upper case only. */
			char key[sizeof(var)];
			size_t n = 0;
			for (const char *p = rest; *p; p++) {
				if (!(isupper((unsigned char)*p) || isdigit((unsigned char)*p) ||
				      *p == '_'))
					break;
				key[n++] = (char)tolower((unsigned char)*p);
			}
			if (rest[n])
				continue; /* not in the convention's spelling: not ours */
			key[n] = '\0';
			const struct wb_conf_key *k = wb_conf_find(&secs[s], key);
			if (!k) {
				if (strcmp(key, "opts") == 0 || strncmp(key, "test_", 5) == 0)
					continue;
				snprintf(err, errlen, "%s: [%s] has no key '%s' (see --help)", var,
					 secs[s].name, key);
				return -1;
			}
			if (wb_conf_set(&secs[s], key, eq + 1, var, err, errlen) < 0)
				return -1;
			if (fn)
				fn(var, &secs[s], k, eq + 1, arg);
			set++;
		}
	}
	return set;
}

int wb_conf_defaults(const struct wb_conf_section *secs, size_t nsecs, char *err, size_t errlen)
{
	for (size_t s = 0; s < nsecs; s++)
		for (size_t i = 0; i < secs[s].nkeys; i++) {
			const struct wb_conf_key *k = &secs[s].keys[i];
			if (k->def &&
			    wb_conf_set(&secs[s], k->name, k->def, "default", err, errlen) < 0)
				return -1;
		}
	return 0;
}

struct load_ctx {
	const struct wb_conf_section *secs;
	size_t nsecs;
	FILE *f;
	int line;     /* lines read so far: the line inih is on */
	int err_line; /* where why happened */
	char why[WB_CONF_ERR_MAX];
	/* The keys set so far, "section key" each, with their lines: a key given twice is
	 * refused (which one would win is not what its reader sees). */
	struct wb_strlist seen;
	int *seen_line;
};

/* Whether section/name was set before (then *line is where); else remembered. -1: no memory. */
static int seen_before(struct load_ctx *ctx, const char *section, const char *name, int *line)
{
	char key[256];
	int n = snprintf(key, sizeof(key), "%s %s", section, name);
	if (n < 0 || (size_t)n >= sizeof(key))
		return 0; /* longer than any key: refused as unknown anyway */
	for (size_t i = 0; i < ctx->seen.n; i++)
		if (strcmp(ctx->seen.v[i], key) == 0) {
			*line = ctx->seen_line[i];
			return 1;
		}
	int *lines = realloc(ctx->seen_line, (ctx->seen.n + 1) * sizeof(*lines));
	if (!lines)
		return -1;
	ctx->seen_line = lines;
	lines[ctx->seen.n] = ctx->line;
	return strlist_push(&ctx->seen, key, (size_t)n) < 0 ? -1 : 0;
}

static void ctx_fail(struct load_ctx *ctx, int line, const char *fmt, const char *a, const char *b)
{
	if (ctx->why[0])
		return; /* keep the first error */
	snprintf(ctx->why, sizeof(ctx->why), fmt, a, b);
	ctx->err_line = line;
}

static bool section_known(const char *name)
{
	for (const char *const *known = wb_conf_known_sections; *known; known++)
		if (strcmp(*known, name) == 0)
			return true;
	return false;
}

/*
 * inih's line reader, counting lines so errors found in the handler carry their
 * own line, and checking section names where they stand (inih calls the handler
 * only for keys, so an unknown section would otherwise show at its first key).
 */
static char *read_line(char *buf, int size, void *stream)
{
	struct load_ctx *ctx = stream;
	char *line = fgets(buf, size, ctx->f);
	if (!line)
		return NULL;
	ctx->line++;
	size_t len = strlen(line);
	if (len == (size_t)size - 1 && line[len - 1] != '\n' && !feof(ctx->f)) {
		char what[32];
		snprintf(what, sizeof(what), "%d", size - 2);
		ctx_fail(ctx, ctx->line, "line longer than %s characters%s", what, "");
	}
	const char *p = line + strspn(line, " \t");
	const char *close = strchr(p, ']');
	if (*p == '[' && close) {
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)(close - p - 1), p + 1);
		if (!section_known(name))
			ctx_fail(ctx, ctx->line, "unknown section [%s]%s", name, "");
	}
	return line;
}

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *ctx = user;
	char why[256];
	if (!section[0]) {
		ctx_fail(ctx, ctx->line, "key '%s' outside a section%s", name, "");
		return 0;
	}
	for (size_t s = 0; s < ctx->nsecs; s++) {
		if (strcmp(ctx->secs[s].name, section) != 0)
			continue;
		const struct wb_conf_key *k = wb_conf_find(&ctx->secs[s], name);
		if (!k) {
			ctx_fail(ctx, ctx->line, "unknown key '%s' in [%s]", name, section);
			return 0;
		}
		int first = 0;
		int dup = seen_before(ctx, section, name, &first);
		if (dup < 0) {
			ctx_fail(ctx, ctx->line, "out of memory%s%s", "", "");
			return 0;
		}
		if (dup > 0) {
			char what[200];
			snprintf(what, sizeof(what), "[%s] %s: set twice", section, name);
			snprintf(why, sizeof(why), " (first on line %d)", first);
			ctx_fail(ctx, ctx->line, "%s%s", what, why);
			return 0;
		}
		char what[200];
		if (wb_conf_parse(k, ctx->secs[s].dst, value, why, sizeof(why)) < 0) {
			snprintf(what, sizeof(what), "[%s] %s: ", section, name);
			ctx_fail(ctx, ctx->line, "%s%s", what, why);
			return 0;
		}
		return 1;
	}
	/* Another stage's section is skipped; an unknown one was reported by read_line. */
	return section_known(section) ? 1 : 0;
}

int wb_conf_load(const char *path, const struct wb_conf_section *secs, size_t nsecs, char *err,
		 size_t errlen)
{
	struct load_ctx ctx = {.secs = secs, .nsecs = nsecs};
	/* A config is a regular file: /dev/zero would be read for ever (one endless line), a
	 * FIFO would block the open. O_NONBLOCK opens a FIFO at once, to be refused. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, 0) < 0 || !(ctx.f = fdopen(fd, "r"))) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	/*
	 * Debian's libinih takes its line limit at run time: one heap buffer of our
	 * size (no realloc, so read_line sees each line whole) lifts the 200 it is built with.
	 */
	ini_use_stack = false;
	ini_allow_realloc = false;
	ini_max_line = ini_initial_alloc = WB_CONF_LINE_MAX;
	int line = ini_parse_stream(read_line, &ctx, on_ini, &ctx);
	fclose(ctx.f);
	strlist_clear(&ctx.seen);
	free(ctx.seen_line);
	if (line < 0) {
		snprintf(err, errlen, "%s: cannot parse (out of memory)", path);
		return -1;
	}
	if (line == 0 && !ctx.why[0])
		return 0;
	/* inih reports the first line it disliked; ours may come from a later line. */
	if (line > 0 && (!ctx.why[0] || line < ctx.err_line))
		snprintf(err, errlen,
			 "%s:%d: syntax error (expected [section], key = value, or a ; comment)",
			 path, line);
	else
		snprintf(err, errlen, "%s:%d: %s", path, ctx.err_line, ctx.why);
	return -1;
}

/* Replace %r and %h in s; returns a new string or NULL. */
static char *expand(const char *s, const char *runtime_dir, const char *host)
{
	size_t cap = strlen(s) + 1;
	for (const char *p = s; (p = strchr(p, '%')); p++)
		cap += strlen(runtime_dir) + strlen(host);
	char *out = malloc(cap);
	if (!out)
		return NULL;
	char *o = out;
	for (const char *p = s; *p; p++) {
		if (p[0] == '%' && p[1] == 'r') {
			o = stpcpy(o, runtime_dir);
			p++;
		} else if (p[0] == '%' && p[1] == 'h') {
			o = stpcpy(o, host);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			*o++ = '%';
			p++;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

static int expand_slot(char **slot, const char *runtime_dir, const char *host)
{
	if (!*slot || !strchr(*slot, '%'))
		return 0;
	char *e = expand(*slot, runtime_dir, host);
	if (!e)
		return -1;
	free(*slot);
	*slot = e;
	return 0;
}

int wb_conf_expand(const struct wb_conf_section *secs, size_t nsecs, const char *runtime_dir,
		   const char *host)
{
	for (size_t s = 0; s < nsecs; s++)
		for (size_t i = 0; i < secs[s].nkeys; i++) {
			const struct wb_conf_key *k = &secs[s].keys[i];
			char *slot = (char *)secs[s].dst + k->off;
			bool str =
			    WB_CONF_TYPE(k) == WB_CONF_STR || WB_CONF_TYPE(k) == WB_CONF_UTF8;
			if (str && expand_slot((char **)slot, runtime_dir, host) < 0)
				return -1;
			if (WB_CONF_IS_LIST(k)) {
				struct wb_strlist *l = (struct wb_strlist *)slot;
				for (size_t j = 0; j < l->n; j++)
					if (expand_slot(&l->v[j], runtime_dir, host) < 0)
						return -1;
			}
		}
	return 0;
}

static bool same_value(const struct wb_conf_key *k, const char *a, const char *b)
{
	switch (WB_CONF_TYPE(k)) {
	case WB_CONF_STR:
	case WB_CONF_UTF8:
	case WB_CONF_ENUM: {
		const char *x = *(char *const *)a, *y = *(char *const *)b;
		return strcmp(x ? x : "", y ? y : "") == 0;
	}
	case WB_CONF_LIST:
	case WB_CONF_GLOBS: {
		const struct wb_strlist *x = (const void *)a, *y = (const void *)b;
		if (x->n != y->n)
			return false;
		for (size_t i = 0; i < x->n; i++)
			if (strcmp(x->v[i], y->v[i]) != 0)
				return false;
		return true;
	}
	case WB_CONF_INT:
		return *(const int64_t *)a == *(const int64_t *)b;
	case WB_CONF_DURATION:
		return *(const uint64_t *)a == *(const uint64_t *)b;
	case WB_CONF_BOOL:
		return *(const bool *)a == *(const bool *)b;
	case WB_CONF_DOUBLE:
		return *(const double *)a == *(const double *)b;
	}
	return false;
}

size_t wb_conf_restart_changes(const struct wb_conf_section *sec, const void *a, const void *b,
			       char *buf, size_t len)
{
	size_t n = 0, used = 0;
	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sec->nkeys; i++) {
		const struct wb_conf_key *k = &sec->keys[i];
		if (!(k->type & WB_CONF_RESTART) ||
		    same_value(k, (const char *)a + k->off, (const char *)b + k->off))
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", n ? ", " : "", k->name);
		if (w < 0 || used + (size_t)w >= len) {
			buf[used] = '\0'; /* whole names only */
			len = used + 1;
		} else {
			used += (size_t)w;
		}
		n++;
	}
	return n;
}

void wb_conf_free(const struct wb_conf_section *secs, size_t nsecs)
{
	for (size_t s = 0; s < nsecs; s++)
		for (size_t i = 0; i < secs[s].nkeys; i++) {
			const struct wb_conf_key *k = &secs[s].keys[i];
			char *slot = (char *)secs[s].dst + k->off;
			if (WB_CONF_TYPE(k) == WB_CONF_STR || WB_CONF_TYPE(k) == WB_CONF_UTF8 ||
			    WB_CONF_TYPE(k) == WB_CONF_ENUM) {
				free(*(char **)slot);
				*(char **)slot = NULL;
			} else if (WB_CONF_IS_LIST(k)) {
				strlist_clear((struct wb_strlist *)slot);
			}
		}
}

void wb_conf_usage(const struct wb_conf_section *sec, void *stream)
{
	FILE *out = stream;
	for (size_t i = 0; i < sec->nkeys; i++) {
		const struct wb_conf_key *k = &sec->keys[i];
		fprintf(out, "  --%-22s %s", k->name, k->help ? k->help : "");
		if (WB_CONF_TYPE(k) == WB_CONF_ENUM)
			fprintf(out, " (%s)", k->choices);
		if (k->def && k->def[0])
			fprintf(out, " [%s]", k->def);
		fputc('\n', out);
	}
}

void wb_conf_print_ini(const struct wb_conf_section *sec, const char *summary, void *stream)
{
	FILE *out = stream;
	fprintf(out, "# %s\n[%s]\n", summary, sec->name);
	for (size_t i = 0; i < sec->nkeys; i++) {
		const struct wb_conf_key *k = &sec->keys[i];
		char text[1024];
		bool is_enum = WB_CONF_TYPE(k) == WB_CONF_ENUM;
		snprintf(text, sizeof(text), "%s%s%s%s", k->help ? k->help : "",
			 is_enum ? " (" : "", is_enum ? k->choices : "",
			 is_enum	      ? ")"
			 : WB_CONF_IS_LIST(k) ? " (comma-separated)"
					      : "");
		/* Wrap at 78 columns: config lines stay short and readable. */
		const char *p = text;
		while (*p) {
			size_t n = strlen(p);
			if (n > 76) {
				/* Break at the last space before column 76, or after a longer word.
				 */
				size_t cut = 76;
				while (cut > 0 && p[cut] != ' ')
					cut--;
				if (cut == 0)
					while (p[cut] && p[cut] != ' ')
						cut++;
				n = cut;
			}
			fprintf(out, "# %.*s\n", (int)n, p);
			p += n;
			while (*p == ' ')
				p++;
		}
		fprintf(out, "#%s = %s\n", k->name, k->def ? k->def : "");
	}
}
