/*
 * Who a cgroup is: container id and runtime, pod uid, VM, systemd service,
 * parsed from the cgroup path alone (cgroupfs and systemd drivers, v1 and v2),
 * plus the parsers for /proc/<pid>/cgroup and /proc/self/mountinfo. Pure code.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usaged.h"

#define CID_LEN 64

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return n > 0;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);
	return n >= k && memcmp(s, prefix, k) == 0;
}

/* systemd escapes unit names: "\x2d" is '-'. */
static void unescape(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < size; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' &&
		    isxdigit((unsigned char)s[i + 2]) && isxdigit((unsigned char)s[i + 3])) {
			char hex[3] = {s[i + 2], s[i + 3], 0};
			out[o++] = (char)strtol(hex, NULL, 16);
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* Container scopes and cgroupfs names that say their runtime. */
static const struct {
	const char *prefix;
	const char *runtime;
	bool monitor; /* conmon: the runtime's monitor, not the container */
} runtimes[] = {
    {"docker-", "docker", false},	{"cri-containerd-", "containerd", false},
    {"crio-conmon-", "cri-o", true},	{"crio-", "cri-o", false},
    {"libpod-conmon-", "podman", true}, {"libpod-", "podman", false},
    {"nerdctl-", "containerd", false},
};

/* "<prefix><64 hex>" in c[0..n): which runtime entry, or -1. */
static int match_runtime(const char *c, size_t n)
{
	for (size_t r = 0; r < sizeof(runtimes) / sizeof(runtimes[0]); r++) {
		size_t k = strlen(runtimes[r].prefix);
		if (n == k + CID_LEN && starts_with(c, n, runtimes[r].prefix) &&
		    all_hex(c + k, CID_LEN))
			return (int)r;
	}
	return -1;
}

/*
 * A pod uid after "pod" at the start of c or after a '-': 8-4-4-4-12 hex with
 * '-' (cgroupfs) or '_' (systemd, which escapes '-'), or 32 hex (static pods).
 */
static bool match_pod(const char *c, size_t n, char *uid, size_t size)
{
	for (size_t i = 0; i + 3 < n; i++) {
		if ((i == 0 || c[i - 1] == '-') && memcmp(c + i, "pod", 3) == 0) {
			const char *u = c + i + 3;
			size_t k = n - i - 3, hex = 0;
			if (k != 32 && k != 36)
				continue;
			for (size_t j = 0; j < k; j++)
				hex +=
				    isxdigit((unsigned char)u[j]) && !isupper((unsigned char)u[j]);
			if (hex != 32)
				continue;
			if (k == 36 && !((u[8] == '-' || u[8] == '_') && u[13] == u[8] &&
					 u[18] == u[8] && u[23] == u[8]))
				continue;
			snprintf(uid, size, "%.*s", (int)k, u);
			for (char *p = uid; *p; p++)
				if (*p == '_')
					*p = '-';
			return true;
		}
	}
	return false;
}

/*
 * libvirt's scope "machine-qemu\x2d<id>\x2d<name>" (systemd) or its cgroupfs
 * directory "qemu-<id>-<name>.libvirt-qemu"; older libvirt leaves out the id.
 */
static bool match_vm(const char *c, size_t n, char *name, size_t size)
{
	char buf[256];
	const char *p;

	if (starts_with(c, n, "machine-qemu")) {
		unescape(c, n, buf, sizeof(buf));
		p = buf + strlen("machine-qemu");
	} else if (ends_with(c, n, ".libvirt-qemu") && starts_with(c, n, "qemu-")) {
		snprintf(buf, sizeof(buf), "%.*s", (int)(n - strlen(".libvirt-qemu")), c);
		p = buf + strlen("qemu");
	} else {
		return false;
	}
	if (*p != '-' || !p[1])
		return false;
	p++;
	const char *q = p;
	while (isdigit((unsigned char)*q))
		q++;
	if (q > p && *q == '-' && q[1])
		p = q + 1;
	snprintf(name, size, "%s", p);
	return true;
}

void ident_parse(const char *path, struct wb_cgroup *out)
{
	int depth = 0, ident_depth = -1, service_depth = -1;
	char prev[256] = "";
	bool kube = strstr(path, "kubepods") != NULL;

	out->runtime[0] = out->container_id[0] = out->pod_uid[0] = out->vm[0] = out->service[0] =
	    '\0';
	for (const char *c = path; *c; depth++) {
		while (*c == '/')
			c++;
		size_t n = strcspn(c, "/");
		if (n == 0)
			break;
		size_t base = n; /* without the unit suffix */
		bool service = ends_with(c, n, ".service");
		if (ends_with(c, n, ".scope") || ends_with(c, n, ".slice"))
			base = n - 6;
		else if (service)
			base = n - 8;

		int r = match_runtime(c, base);
		if (r >= 0) {
			snprintf(out->runtime, sizeof(out->runtime), "%s", runtimes[r].runtime);
			if (runtimes[r].monitor)
				out->container_id[0] = '\0';
			else
				snprintf(out->container_id, sizeof(out->container_id), "%.*s",
					 CID_LEN, c + strlen(runtimes[r].prefix));
			ident_depth = depth;
		} else if (base == CID_LEN && all_hex(c, CID_LEN)) {
			/* cgroupfs drivers name the directory by the bare id; only docker's parent
			 * says who. */
			snprintf(out->container_id, sizeof(out->container_id), "%.*s", CID_LEN, c);
			snprintf(out->runtime, sizeof(out->runtime), "%s",
				 strcmp(prev, "docker") == 0 ? "docker" : "");
			ident_depth = depth;
		} else if (kube && match_pod(c, base, out->pod_uid, sizeof(out->pod_uid))) {
			ident_depth = depth;
		} else if (match_vm(c, base, out->vm, sizeof(out->vm))) {
			snprintf(out->runtime, sizeof(out->runtime), "libvirt");
			ident_depth = depth;
		} else if (service) {
			snprintf(out->service, sizeof(out->service), "%.*s", (int)n, c);
			service_depth = depth;
		}
		snprintf(prev, sizeof(prev), "%.*s", (int)n, c);
		c += n;
	}
	/* A service outside the container or VM (containerd.service, user@1000.service) is not its
	 * name. */
	if (service_depth < ident_depth)
		out->service[0] = '\0';
	usaged_utf8_clean(out->vm);
	usaged_utf8_clean(out->service);
}

int ident_parse_cgfile(const char *text, struct ident_cgfile *out)
{
	int prio_best = 0, lines = 0;

	memset(out, 0, sizeof(*out));
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		const char *c1 = memchr(l, ':', n);
		const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
		if (c2) {
			const char *ctl = c1 + 1, *path = c2 + 1;
			size_t nctl = (size_t)(c2 - ctl), npath = n - (size_t)(path - l);
			lines++;
			if (strncmp(l, "0:", 2) == 0 && nctl == 0) {
				out->has_v2 = true;
				snprintf(out->v2_path, sizeof(out->v2_path), "%.*s", (int)npath,
					 path);
			} else if (!(npath == 1 && path[0] == '/')) {
				/* The v1 line that best names a workload: systemd's own tree, then
				 * cpu, then any. */
				char ctls[64];
				snprintf(ctls, sizeof(ctls), "%.*s", (int)nctl, ctl);
				int prio = strcmp(ctls, "name=systemd") == 0
					       ? 3
					       : (strstr(ctls, "cpu") ? 2 : 1);
				if (prio > prio_best) {
					prio_best = prio;
					out->has_v1 = true;
					snprintf(out->v1_controllers, sizeof(out->v1_controllers),
						 "%s", ctls);
					snprintf(out->v1_path, sizeof(out->v1_path), "%.*s",
						 (int)npath, path);
				}
			}
		}
		l += n;
		if (*l == '\n')
			l++;
	}
	return lines ? 0 : -1;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unoctal(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < size; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			out[o++] =
			    (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

int ident_parse_mountinfo(const char *line, struct ident_mount *out)
{
	/* "36 25 0:31 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate"
	 */
	const char *f[5];
	size_t fl[5];
	const char *p = line;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < 5; i++) {
		while (*p == ' ')
			p++;
		f[i] = p;
		fl[i] = strcspn(p, " \n");
		if (fl[i] == 0)
			return -1;
		p += fl[i];
	}
	const char *sep = strstr(p, " - ");
	if (!sep)
		return -1;
	p = sep + 3;
	size_t nfs = strcspn(p, " \n");
	const char *src = p + nfs;
	if (*src != ' ')
		return -1;
	src++;
	const char *opts = src + strcspn(src, " \n");
	if (*opts != ' ')
		return -1;
	opts++;
	size_t nopts = strcspn(opts, " \n");

	if (nfs == 7 && memcmp(p, "cgroup2", 7) == 0)
		out->v2 = true;
	else if (!(nfs == 6 && memcmp(p, "cgroup", 6) == 0))
		return 0;
	unoctal(f[3], fl[3], out->root, sizeof(out->root));
	unoctal(f[4], fl[4], out->point, sizeof(out->point));
	if (!out->v2)
		snprintf(out->options, sizeof(out->options), "%.*s", (int)nopts, opts);
	return 1;
}

bool ident_mount_matches(const struct ident_mount *m, const char *controllers)
{
	if (m->v2 || !controllers[0])
		return false;
	for (const char *c = controllers; *c;) {
		size_t k = strcspn(c, ",");
		bool found = false;
		for (const char *o = m->options; *o && !found;) {
			size_t j = strcspn(o, ",");
			found = j == k && memcmp(o, c, k) == 0;
			o += j;
			if (*o == ',')
				o++;
		}
		if (!found)
			return false;
		c += k;
		if (*c == ',')
			c++;
	}
	return true;
}
