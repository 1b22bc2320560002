/* libFuzzer target for the config parser: any file gives values or a file:line error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

struct conf {
	char *pub;
	struct wb_strlist sub;
	int64_t n;
	uint64_t interval_ns;
	bool flag;
	double ratio;
	char *method;
};

static const struct wb_conf_key keys[] = {
    {"pub", WB_CONF_STR, offsetof(struct conf, pub), "ipc://%r/x.sock", 0, 0, NULL, ""},
    {"sub", WB_CONF_LIST, offsetof(struct conf, sub), "a,b", 0, 0, NULL, ""},
    {"n", WB_CONF_INT, offsetof(struct conf, n), "3", 1, 10, NULL, ""},
    {"interval", WB_CONF_DURATION, offsetof(struct conf, interval_ns), "1s", 10e6, 3600e9, NULL,
     ""},
    {"flag", WB_CONF_BOOL, offsetof(struct conf, flag), "no", 0, 0, NULL, ""},
    {"ratio", WB_CONF_DOUBLE, offsetof(struct conf, ratio), "0.5", 0, 1, NULL, ""},
    {"method", WB_CONF_ENUM, offsetof(struct conf, method), "a", 0, 0, "a|b", ""},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	if (!path[0]) {
		snprintf(path, sizeof(path), "/tmp/wb-fuzz-conf-%d", (int)getpid());
	}
	FILE *f = fopen(path, "wb");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	struct conf c = {0};
	struct wb_conf_section sec = {"alignd", keys, sizeof(keys) / sizeof(keys[0]), &c};
	char err[WB_CONF_ERR_MAX];
	if (wb_conf_defaults(&sec, 1, err, sizeof(err)) < 0)
		abort();
	if (wb_conf_load(path, &sec, 1, err, sizeof(err)) < 0) {
		if (strncmp(err, path, strlen(path)) != 0)
			abort(); /* every error names the file */
	} else if (wb_conf_expand(&sec, 1, "/run/wattbus", "host") < 0) {
		abort();
	}
	wb_conf_free(&sec, 1);
	return 0;
}
