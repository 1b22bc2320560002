/*
 * One INI file (/etc/wattbus/wattbus.conf) with a [global] section and one per
 * stage, parsed by inih. Each stage describes its keys in a table; the same
 * table drives defaults, validation with file:line, and --key command-line flags.
 */
#ifndef WB_CONFIG_H
#define WB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wb_conf_type {
	WB_CONF_STR,	  /* char * */
	WB_CONF_LIST,	  /* struct wb_strlist: comma-separated, or the flag given several times */
	WB_CONF_INT,	  /* int64_t, bounds min..max */
	WB_CONF_DURATION, /* uint64_t ns, bounds min..max in ns */
	WB_CONF_BOOL,	  /* bool: true/false/yes/no/on/off/1/0 */
	WB_CONF_DOUBLE,	  /* double, bounds min..max */
	WB_CONF_ENUM,	  /* char *, one of choices "a|b|c" */
	WB_CONF_UTF8,  /* char *, valid UTF-8 without control characters (names sent on the bus) */
	WB_CONF_GLOBS, /* struct wb_strlist of shell patterns (fnmatch), each checked */
};
#define WB_CONF_TYPE_MASK 0xff
/* Flag or'ed into a key's type: the key is read at startup only, so a reload
 * that changes it says so and keeps the old value. */
#define WB_CONF_RESTART 0x100
/* Flag or'ed into a DURATION key's type: 0 turns it off; any other value is held to
 * [min, max] (a floor under which the stage would do its work at every message). */
#define WB_CONF_OFF0 0x200

struct wb_strlist {
	size_t n;
	char **v;
};

struct wb_conf_key {
	const char *name; /* key in the section; --name on the command line */
	enum wb_conf_type type;
	size_t off;	 /* offset into the section's struct */
	const char *def; /* default as text; %r expands to the runtime dir, %h to the host name */
	double min, max; /* INT, DURATION (ns), DOUBLE; min == max means unbounded */
	const char *choices; /* ENUM */
	const char *help;
};

/* The key's type without its flags. */
#define WB_CONF_TYPE(k) ((enum wb_conf_type)((k)->type & WB_CONF_TYPE_MASK))
/* The key's value is a struct wb_strlist (LIST, GLOBS). */
#define WB_CONF_IS_LIST(k) (WB_CONF_TYPE(k) == WB_CONF_LIST || WB_CONF_TYPE(k) == WB_CONF_GLOBS)

struct wb_conf_section {
	const char *name; /* "global", "powerd", ... */
	const struct wb_conf_key *keys;
	size_t nkeys;
	void *dst;
};

#define WB_CONF_ERR_MAX 512
/* Longest config line (a long sub list fits); longer ones are refused with file:line. */
#define WB_CONF_LINE_MAX 65536

/*
 * Several key tables as one section: a stage's own keys, then each of its variants' keys (powerd's
 * sources bring theirs, powerd/conf.c). Part i's keys have offsets into a struct of parts[i].size
 * bytes; in the composed struct that struct starts at offs[i] (aligned for any type). out gets
 * every part's keys in order with their offsets moved there. Returns the number of keys, with
 * *size the composed struct's size, or -1 with err (more than max keys, or a name given twice).
 */
struct wb_conf_part {
	const struct wb_conf_key *keys;
	size_t nkeys;
	size_t size;
};
int wb_conf_compose(const struct wb_conf_part *parts, size_t nparts, struct wb_conf_key *out,
		    size_t max, size_t *offs, size_t *size, char *err, size_t errlen);

/* Every section name a config file may hold; others are errors. */
extern const char *const wb_conf_known_sections[];

/* Set every key of every section to its default. Returns 0 or -1 (err filled). */
int wb_conf_defaults(const struct wb_conf_section *secs, size_t nsecs, char *err, size_t errlen);
/*
 * Read path into secs. Sections of other stages are skipped; unknown sections,
 * unknown keys, bad values and syntax errors fail with "path:line: reason".
 */
int wb_conf_load(const char *path, const struct wb_conf_section *secs, size_t nsecs, char *err,
		 size_t errlen);
/* Set one key from text (a flag); origin names it in errors ("--interval"). */
int wb_conf_set(const struct wb_conf_section *sec, const char *key, const char *value,
		const char *origin, char *err, size_t errlen);
/*
 * Environment overrides, the convention containers expect: WATTBUS_<SECTION>_<KEY>
 * (upper case, "WATTBUS_EXPORTD_LISTEN") sets the key of one of secs, after the
 * file and before the flags. envp is "NAME=value" strings, NULL-terminated
 * (environ). A variable naming one of secs but none of its keys is an error, as
 * an unknown key in the file is, except WATTBUS_<SECTION>_OPTS (the systemd
 * units' extra flags) and WATTBUS_<SECTION>_TEST_* (test hooks). Variables for
 * other sections are left alone. fn, when given, is told of each key set.
 * Returns how many keys were set, or -1 with "NAME: ..." in err.
 */
typedef void(wb_conf_env_fn)(const char *var, const struct wb_conf_section *sec,
			     const struct wb_conf_key *k, const char *value, void *arg);
int wb_conf_env(const struct wb_conf_section *secs, size_t nsecs, char *const *envp,
		wb_conf_env_fn *fn, void *arg, char *err, size_t errlen);
/*
 * Set one key of the struct dst from text, with the key's type and bounds; why says only what
 * is wrong with the value ("'x' is not a decimal integer"), for the caller to name the key or
 * flag. The one parser behind the file, the variables, the flags and the wattbus verbs' flags.
 */
int wb_conf_parse(const struct wb_conf_key *k, void *dst, const char *value, char *why, size_t len);
/* Find the section and key a flag name refers to. */
const struct wb_conf_key *wb_conf_find(const struct wb_conf_section *sec, const char *key);
/* Expand %r and %h in every string and list value. */
int wb_conf_expand(const struct wb_conf_section *secs, size_t nsecs, const char *runtime_dir,
		   const char *host);
/*
 * Names of the WB_CONF_F_RESTART keys whose value differs between two structs
 * of the section, comma-separated into buf ("" when none). Returns how many.
 */
size_t wb_conf_restart_changes(const struct wb_conf_section *sec, const void *a, const void *b,
			       char *buf, size_t len);
/* Free the strings and lists of every section. */
void wb_conf_free(const struct wb_conf_section *secs, size_t nsecs);
/* Print the section as commented INI: "# help" then "#key = default" for each key. */
void wb_conf_print_ini(const struct wb_conf_section *sec, const char *summary, void *stream);
/* Print the keys as "--name VALUE  help (default: ...)" lines. */
void wb_conf_usage(const struct wb_conf_section *sec, void *stream);

/* The whole text as an integer (decimal, or 0x hex) / a finite number: the parsers
 * behind INT and DOUBLE keys, for flags outside a key table too. Return 0 or -1. */
int wb_parse_int(const char *text, int64_t *v);
int wb_parse_double(const char *text, double *v);

#endif
