/*
 * hwmon power meters: power*_input / power*_average (microwatts, integrated by
 * trapezoids), energy*_input (microjoules, a counter taken as is), and ACPI
 * power meters (power1_average over power1_average_interval). Zone kinds come
 * from the channel labels, else from the device name.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerd.h"

#define HWMON_CHANNELS_MAX 256

static bool has_word(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

const char *hwmon_kind(const char *label, const char *devname)
{
	char l[64] = "";
	for (size_t i = 0; label && label[i] && i + 1 < sizeof(l); i++)
		l[i] = (char)tolower((unsigned char)label[i]), l[i + 1] = '\0';
	if (l[0]) {
		if (has_word(l, "gpu") || has_word(l, "graphics"))
			return "gpu";
		if (has_word(l, "dram") || has_word(l, "mem"))
			return "dram";
		if (has_word(l, "uncore"))
			return "uncore";
		if (has_word(l, "core"))
			return "core";
		if (has_word(l, "pkg") || has_word(l, "package") || has_word(l, "socket") ||
		    has_word(l, "cpu"))
			return "package";
		if (has_word(l, "psys"))
			return "psys";
		if (has_word(l, "platform") || has_word(l, "system") || has_word(l, "total") ||
		    has_word(l, "node") || has_word(l, "chassis") || has_word(l, "psu") ||
		    has_word(l, "board"))
			return "platform";
	}
	static const struct {
		const char *dev, *kind;
	} devs[] = {{"power_meter", "platform"},
		    {"acpi_power_meter", "platform"},
		    {"amdgpu", "gpu"},
		    {"nouveau", "gpu"},
		    {"i915", "gpu"},
		    {"xe", "gpu"},
		    {"nvidia", "gpu"},
		    {"amd_energy", "package"},
		    {"fam15h_power", "package"}};
	for (size_t i = 0; devname && i < sizeof(devs) / sizeof(devs[0]); i++)
		if (!strcmp(devname, devs[i].dev))
			return devs[i].kind;
	return "other";
}

struct hwmon_chan {
	unsigned num;
	bool energy, input, average;
	char label[64];
};

static struct hwmon_chan *chan_get(struct hwmon_chan *ch, size_t *n, unsigned num, bool energy)
{
	for (size_t i = 0; i < *n; i++)
		if (ch[i].num == num && ch[i].energy == energy)
			return &ch[i];
	if (*n == HWMON_CHANNELS_MAX)
		return NULL;
	ch[*n] = (struct hwmon_chan){.num = num, .energy = energy};
	return &ch[(*n)++];
}

static int chan_cmp(const void *a, const void *b)
{
	const struct hwmon_chan *x = a, *y = b;
	if (x->energy != y->energy)
		return x->energy ? -1 : 1;
	return x->num < y->num ? -1 : x->num > y->num;
}

/* The channels of one attribute directory; returns how many. */
static size_t hwmon_channels(const char *dir, struct hwmon_chan *ch)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned num;
		int len = 0;
		struct hwmon_chan *c;
		if (sscanf(de->d_name, "energy%u_input%n", &num, &len) == 1 && !de->d_name[len]) {
			if ((c = chan_get(ch, &n, num, true)))
				c->input = true;
		} else if (sscanf(de->d_name, "power%u_input%n", &num, &len) == 1 &&
			   !de->d_name[len]) {
			if ((c = chan_get(ch, &n, num, false)))
				c->input = true;
		} else if (sscanf(de->d_name, "power%u_average%n", &num, &len) == 1 &&
			   !de->d_name[len]) {
			if ((c = chan_get(ch, &n, num, false)))
				c->average = true;
		}
	}
	closedir(d);
	qsort(ch, n, sizeof(*ch), chan_cmp);
	for (size_t i = 0; i < n; i++) {
		char path[PD_PATH_MAX + 64];
		snprintf(path, sizeof(path), "%s/%s%u_label", dir,
			 ch[i].energy ? "energy" : "power", ch[i].num);
		if (pd_read_text(path, ch[i].label, sizeof(ch[i].label)) < 0)
			ch[i].label[0] = '\0';
	}
	return n;
}

static int hwmon_num_cmp(const void *a, const void *b)
{
	return *(const unsigned *)a < *(const unsigned *)b
		   ? -1
		   : *(const unsigned *)a > *(const unsigned *)b;
}

int hwmon_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	static const char *const kinds[] = {"package", "core",	   "uncore", "dram",
					    "psys",    "platform", "gpu",    "other"};
	unsigned per_kind[sizeof(kinds) / sizeof(kinds[0])] = {0};
	char base[PD_PATH_MAX];
	snprintf(base, sizeof(base), "%s/class/hwmon", opts->sysfs_root);
	DIR *dir = opendir(base);
	if (!dir) {
		snprintf(why, whylen, "%s: %s", base, strerror(errno));
		return 0;
	}
	unsigned nums[1024];
	size_t ndev = 0;
	struct dirent *de;
	while ((de = readdir(dir)) && ndev < sizeof(nums) / sizeof(nums[0])) {
		unsigned num;
		int len = 0;
		if (sscanf(de->d_name, "hwmon%u%n", &num, &len) == 1 && !de->d_name[len])
			nums[ndev++] = num;
	}
	closedir(dir);
	qsort(nums, ndev, sizeof(nums[0]), hwmon_num_cmp);

	static struct hwmon_chan ch[HWMON_CHANNELS_MAX];
	int added = 0, failed = 0;
	char first_err[PD_PATH_MAX + 128] = "";
	uint64_t max_uw = (uint64_t)(opts->max_power_w * 1e6);
	uint64_t max_gap_ns = integ_bridge_ns(opts->interval_ns);
	for (size_t k = 0; k < ndev; k++) {
		char hdir[PD_PATH_MAX], adir[PD_PATH_MAX + 16], devname[64] = "",
								path[PD_PATH_MAX + 64];
		pd_fmt(hdir, sizeof(hdir), "%s/hwmon%u", base, nums[k]);
		/* Attributes sit in hwmonN/, or in hwmonN/device/ with older ACPI power meter
		 * drivers. */
		snprintf(adir, sizeof(adir), "%s", hdir);
		size_t nch = hwmon_channels(adir, ch);
		if (nch == 0) {
			snprintf(adir, sizeof(adir), "%s/device", hdir);
			nch = hwmon_channels(adir, ch);
		}
		snprintf(path, sizeof(path), "%s/name", hdir);
		if (pd_read_text(path, devname, sizeof(devname)) < 0) {
			snprintf(path, sizeof(path), "%s/name", adir);
			if (pd_read_text(path, devname, sizeof(devname)) < 0)
				devname[0] = '\0';
		}
		for (size_t i = 0; i < nch; i++) {
			const struct hwmon_chan *c = &ch[i];
			if (!c->energy && c->label[0]) {
				/* an energy counter of the same quantity is exact: no need to
				 * integrate its power */
				bool dup = false;
				for (size_t j = 0; j < nch; j++)
					dup |= ch[j].energy && !strcmp(ch[j].label, c->label);
				if (dup)
					continue;
			}
			const char *attr = c->energy ? "energy" : "power";
			const char *suffix = c->energy || c->input ? "input" : "average";
			char file[PD_PATH_MAX + 64], err[PD_PATH_MAX + 256];
			snprintf(file, sizeof(file), "%s/%s%u_%s", adir, attr, c->num, suffix);
			uint64_t v;
			enum pd_read_err rc = pd_read_u64(file, &v, err, sizeof(err));
			if (rc != PD_READ_OK) {
				failed++;
				if (!first_err[0])
					pd_fmt(first_err, sizeof(first_err), "%s", err);
				log_warnx("hwmon: %s (%s); channel left out", err, devname);
				continue;
			}
			const char *kind = hwmon_kind(c->label, devname);
			size_t ki = 0;
			while (ki + 1 < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kinds[ki], kind))
				ki++;
			struct pd_zone z;
			pd_zone_init(&z, &hwmon_source, kind, per_kind[ki]);
			pd_zone_name(&z, kind, per_kind[ki]++);
			snprintf(z.path, sizeof(z.path), "%.255s", file);
			pd_fmt(z.file, sizeof(z.file), "%s", file);
			if (c->energy) {
				counter_init(&z.ctr, 0, 1, 1, max_uw);
			} else {
				z.is_power = true;
				integ_init(&z.integ, max_uw, max_gap_ns);
			}
			if (!c->energy && !c->input) {
				uint64_t ms = 0;
				snprintf(path, sizeof(path), "%s/power%u_average_interval", adir,
					 c->num);
				if (pd_read_u64(path, &ms, err, sizeof(err)) == PD_READ_OK && ms) {
					z.avg_interval_ms = ms;
					log_info(
					    "hwmon: %s (%s) is the average over %llu ms%s", file,
					    devname, (unsigned long long)ms,
					    opts->interval_ns < ms * 1000000ull
						? "; samples closer than that repeat the same average, which still integrates to the right energy over the window"
						: "");
				}
			}
			log_debug("hwmon: %s: %s label \"%s\" -> %s", file, devname, c->label,
				  z.name);
			if (pd_set_add(set, &z) >= 0)
				added++;
		}
	}
	if (added == 0) {
		if (failed)
			snprintf(why, whylen, "no readable power or energy channel: %s", first_err);
		else
			snprintf(
			    why, whylen,
			    "no power*_input, power*_average or energy*_input under %s (%zu devices)",
			    base, ndev);
	}
	return added;
}

const struct pd_source hwmon_source = {
    .name = "hwmon",
    .in_auto = true,
    .power_from = "from microwatts",
    .discover = hwmon_discover,
    .read = pd_zone_read_file,
    .close_zone = pd_zone_close_file,
};
