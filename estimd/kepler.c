/*
 * Kepler's model server and estimator sidecar, from the client side: the
 * ModelRequest estimd posts to a model server, and the PowerRequest exchange
 * with the general estimator on a unix socket (one JSON object each way, no
 * length prefix: the server reads until the text ends with '}', the client
 * reads at most 4096 bytes), bounded by a deadline so that a slot never waits longer.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "estimd.h"

#define POWER_MAX_W 1e5 /* no zone of one node draws this */

static void km_add(struct kepler_metrics *km, const char *name, int id)
{
	if (km->n < KEPLER_METRICS_MAX) {
		km->name[km->n] = name;
		km->id[km->n] = id;
		km->n++;
	}
}

void kepler_metrics_from(const char (*counters)[16], size_t ncounters, struct kepler_metrics *km)
{
	static const struct {
		const char *counter, *feature;
		int id;
	} map[] = {
	    {"cycles", "cpu_cycles", FEAT_CPU_CYCLES},
	    {"instructions", "cpu_instructions", FEAT_CPU_INSTRUCTIONS},
	    {"cache_misses", "cache_miss", FEAT_CACHE_MISS},
	};
	memset(km, 0, sizeof(*km));
	km_add(km, "bpf_cpu_time_ms", FEAT_CPU_TIME_MS);
	km_add(km, "bpf_page_cache_hit", FEAT_UNMEASURED);
	for (size_t m = 0; m < sizeof(map) / sizeof(map[0]); m++)
		for (size_t i = 0; counters && i < ncounters; i++)
			if (strncmp(counters[i], map[m].counter, 16) == 0) {
				km_add(km, map[m].feature, map[m].id);
				break;
			}
}

static json_t *metrics_json(const struct kepler_metrics *km)
{
	json_t *a = json_array();
	for (size_t i = 0; i < km->n; i++)
		json_array_append_new(a, json_string(km->name[i]));
	return a;
}

char *kepler_model_request(const struct kepler_metrics *km, const char *output_type,
			   const struct mspec *spec)
{
	json_t *req = json_pack("{s:o,s:s,s:s,s:b,s:i,s:s,s:s}", "metrics", metrics_json(km),
				"output_type", output_type, "source", "rapl-sysfs", "weight", 1,
				"node_type", -1, "trainer_name", "", "filter", "");
	if (!req)
		return NULL;
	if (spec) {
		json_t *ms = json_object();
		if (spec->processor[0])
			json_object_set_new(ms, "processor", json_string(spec->processor));
		const char *keys[] = {"cores", "chips", "memory", "frequency"};
		uint64_t vals[] = {spec->cores, spec->chips, spec->memory_gib, spec->frequency_mhz};
		for (size_t i = 0; i < 4; i++)
			if (vals[i])
				json_object_set_new(ms, keys[i], json_integer((json_int_t)vals[i]));
		json_object_set_new(req, "machine_spec", ms);
	}
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return s;
}

char *kepler_power_request(const struct kepler_metrics *km, const char *output_type,
			   const double x[FEAT_COUNT])
{
	json_t *row = json_array(), *zero = json_array();
	for (size_t i = 0; i < km->n; i++) {
		int id = km->id[i];
		json_array_append_new(row, json_real(id >= 0 && id < FEAT_COUNT ? x[id] : 0.0));
		json_array_append_new(zero, json_real(0.0));
	}
	struct utsname u;
	const char *arch = uname(&u) == 0 ? u.machine : "unknown";
	json_t *req = json_pack("{s:o,s:[o,o],s:s,s:s,s:[s],s:[s],s:s,s:s}", "metrics",
				metrics_json(km), "values", row, zero, "output_type", output_type,
				"source", "rapl-sysfs", "system_features", "cpu_architecture",
				"system_values", arch, "trainer_name", "", "filter", "");
	if (!req)
		return NULL;
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return s;
}

static bool kepler_zone(const char *z)
{
	static const char *const zones[] = {"package", "core", "uncore", "dram", "platform"};
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++)
		if (strcmp(z, zones[i]) == 0)
			return true;
	return false;
}

static int power_value(const json_t *v, const char *key, size_t row, double *out, char *err,
		       size_t errlen)
{
	if (!json_is_number(v)) {
		snprintf(err, errlen, "powers.%s[%zu]: expected a number", key, row);
		return -1;
	}
	double d = json_number_value(v);
	if (!isfinite(d) || fabs(d) > POWER_MAX_W) {
		snprintf(err, errlen, "powers.%s[%zu]: %g W is not a power of one zone", key, row,
			 d);
		return -1;
	}
	*out = d;
	return 0;
}

int kepler_powers_parse(const char *text, size_t len, struct kepler_powers *out, char *err,
			size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->core_ratio = 1.0;
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "not JSON: %s", je.text);
		return -1;
	}
	int rc = -1;
	const json_t *msg = json_object_get(root, "msg");
	const json_t *powers = json_object_get(root, "powers");
	const json_t *ratio = json_object_get(root, "core_ratio");
	if (!json_is_object(root)) {
		snprintf(err, errlen, "expected a JSON object");
		goto out;
	}
	if (msg && json_is_string(msg) && json_string_length(msg) > 0) {
		snprintf(err, errlen, "msg: %.200s", json_string_value(msg));
		goto out;
	}
	if (!json_is_object(powers) || json_object_size(powers) == 0) {
		snprintf(err, errlen, "powers: missing or empty");
		goto out;
	}
	if (ratio) {
		if (!json_is_number(ratio) || !(json_number_value(ratio) > 0) ||
		    !isfinite(json_number_value(ratio))) {
			snprintf(err, errlen, "core_ratio: expected a number above 0");
			goto out;
		}
		out->core_ratio = json_number_value(ratio);
	}
	const char *zone;
	const json_t *rows;
	json_object_foreach((json_t *)powers, zone, rows)
	{
		if (!kepler_zone(zone)) {
			snprintf(err, errlen,
				 "powers.%.32s: not one of package, core, uncore, dram, platform",
				 zone);
			goto out;
		}
		if (!json_is_array(rows) || json_array_size(rows) != 2) {
			snprintf(err, errlen, "powers.%s: expected 2 values (one per row asked)",
				 zone);
			goto out;
		}
		if (out->n >= MODEL_ZONES_MAX) {
			snprintf(err, errlen, "powers: more than %d zones", MODEL_ZONES_MAX);
			goto out;
		}
		snprintf(out->zone[out->n], sizeof(out->zone[0]), "%s", zone);
		if (power_value(json_array_get(rows, 0), zone, 0, &out->p_w[out->n], err, errlen) <
			0 ||
		    power_value(json_array_get(rows, 1), zone, 1, &out->p0_w[out->n], err, errlen) <
			0)
			goto out;
		out->n++;
	}
	rc = 0;
out:
	json_decref(root);
	if (rc < 0)
		out->n = 0;
	return rc;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until the deadline: 1 ready, 0 past the deadline, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - mono_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		return 1;
	}
}

int kepler_sidecar_call(const char *path, const char *req, int timeout_ms, char *buf, size_t size,
			size_t *len, bool *timed_out, char *err, size_t errlen)
{
	*len = 0;
	*timed_out = false;
	int64_t deadline = mono_ms() + timeout_ms;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s: path too long for a unix socket", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int rc = -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* A unix socket connects at once or not at all (EAGAIN: its backlog is full). */
		snprintf(err, errlen, "%s: connect: %s", path, strerror(errno));
		goto out;
	}
	size_t reqlen = strlen(req), off = 0;
	while (off < reqlen) {
		ssize_t n = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = wait_fd(fd, POLLOUT, deadline);
			if (w > 0)
				continue;
			if (w == 0)
				goto timeout;
		}
		snprintf(err, errlen, "%s: send: %s", path, strerror(errno));
		goto out;
	}
	/* Kepler's client reads one answer of at most 4096 bytes. */
	size_t cap = size - 1 < 4096 ? size - 1 : 4096;
	for (;;) {
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		if (n > 0) {
			*len += (size_t)n;
			buf[*len] = '\0';
			json_error_t je;
			json_t *j = json_loadb(buf, *len, 0, &je);
			if (j) {
				json_decref(j);
				rc = 0;
				goto out;
			}
			if (*len >= cap) {
				snprintf(err, errlen,
					 "%s: answer longer than %zu bytes or not JSON", path, cap);
				goto out;
			}
			continue;
		}
		if (n == 0) {
			buf[*len] = '\0';
			/* Closed: what came is the answer (the parser says whether it is one). */
			if (*len == 0) {
				snprintf(err, errlen, "%s: closed without an answer", path);
				goto out;
			}
			rc = 0;
			goto out;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wait_fd(fd, POLLIN, deadline);
			if (w > 0)
				continue;
			if (w == 0)
				goto timeout;
		}
		snprintf(err, errlen, "%s: recv: %s", path, strerror(errno));
		goto out;
	}
timeout:
	*timed_out = true;
	snprintf(err, errlen, "%s: no answer within %d ms", path, timeout_ms);
out:
	close(fd);
	if (rc < 0)
		buf[*len < size ? *len : size - 1] = '\0';
	return rc;
}
