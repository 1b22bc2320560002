/*
 * powerd's hwmon source on a fake /sys/class/hwmon: a GPU with power1_average,
 * an ACPI power meter (attributes under device/, with its averaging interval),
 * energy counters with labels, and a device with both power and energy.
 */
#include "test_powerd_fake.h"
#include "unit.h"

#define MS 1000000ull
#define T0 (1700000000ull * 1000000000ull)

static void hwmon_tree(void)
{
	fake_new();
	fake_write("sys/class/hwmon/hwmon0/name", "coretemp\n");
	fake_write("sys/class/hwmon/hwmon0/temp1_input", "45000\n");
	fake_write("sys/class/hwmon/hwmon1/name", "amdgpu\n");
	fake_write("sys/class/hwmon/hwmon1/power1_average", "45000000\n");
	fake_write("sys/class/hwmon/hwmon1/power1_cap", "200000000\n");
	fake_write("sys/class/hwmon/hwmon2/name", "power_meter\n");
	fake_write("sys/class/hwmon/hwmon2/device/power1_average", "250000000\n");
	fake_write("sys/class/hwmon/hwmon2/device/power1_average_interval", "1000\n");
	fake_write("sys/class/hwmon/hwmon2/device/power1_model_number", "ACPI000D\n");
	fake_write("sys/class/hwmon/hwmon3/name", "amd_energy\n");
	fake_write("sys/class/hwmon/hwmon3/energy1_input", "1000000\n");
	fake_write("sys/class/hwmon/hwmon3/energy1_label", "Esocket0\n");
	fake_write("sys/class/hwmon/hwmon3/energy2_input", "20000\n");
	fake_write("sys/class/hwmon/hwmon3/energy2_label", "Ecore000\n");
	fake_write("sys/class/hwmon/hwmon12/name", "ina3221\n");
	fake_write("sys/class/hwmon/hwmon12/energy1_input", "500\n");
	fake_write("sys/class/hwmon/hwmon12/energy1_label", "CPU\n");
	fake_write("sys/class/hwmon/hwmon12/power1_input", "7000000\n");
	fake_write("sys/class/hwmon/hwmon12/power1_label", "CPU\n");
	fake_write("sys/class/hwmon/hwmon12/power2_input", "3000000\n");
	fake_write("sys/class/hwmon/hwmon12/power2_label", "GPU\n");
}

static void test_kinds(void)
{
	static const struct {
		const char *label, *dev, *kind;
	} t[] = {
	    {"Esocket0", "amd_energy", "package"},
	    {"Ecore012", "amd_energy", "core"},
	    {"PPT", "amdgpu", "gpu"},
	    {"", "power_meter", "platform"},
	    {"GPU power", "ina3221", "gpu"},
	    {"VDD_CPU", "ina3221", "package"},
	    {"DRAM", "x", "dram"},
	    {"Total system power", "x", "platform"},
	    {"uncore", "x", "uncore"},
	    {"", "nct6775", "other"},
	    {"PSYS", "x", "psys"},
	    {"pkg", "zenpower", "package"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CHECK_STR(hwmon_kind(t[i].label, t[i].dev), t[i].kind);
}

static void test_discovery(void)
{
	hwmon_tree();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(hwmon_discover(set, &o, why, sizeof(why)) == 6);
	static const struct {
		const char *name, *kind, *file;
		bool power;
	} want[] = {
	    {"gpu-0", "gpu", "hwmon1/power1_average", true},
	    {"platform", "platform", "hwmon2/device/power1_average", true},
	    {"package-0", "package", "hwmon3/energy1_input", false},
	    {"core-0", "core", "hwmon3/energy2_input", false},
	    {"package-1", "package", "hwmon12/energy1_input", false},
	    {"gpu-1", "gpu", "hwmon12/power2_input", true},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct pd_zone *z = pd_set_find(set, want[i].name);
		CHECK(z != NULL);
		if (!z) {
			printf("#   missing %s\n", want[i].name);
			continue;
		}
		char path[PD_PATH_MAX];
		snprintf(path, sizeof(path), "%s/class/hwmon/%s", o.sysfs_root, want[i].file);
		CHECK_STR(z->path, path);
		CHECK_STR(z->kind, want[i].kind);
		CHECK(z->is_power == want[i].power);
	}
	const struct pd_zone *pm = pd_set_find(set, "platform");
	CHECK(pm && pm->avg_interval_ms == 1000);
	pd_set_destroy(&set);

	fake_new();
	fake_write("sys/class/hwmon/hwmon0/name", "coretemp\n");
	o = fake_opts();
	set = pd_set_new(&o);
	CHECK(hwmon_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no power*_input") != NULL && strstr(why, "(1 devices)") != NULL);
	pd_set_destroy(&set);
}

/* Power integrated by trapezoids over the sample times; energy counters as is; bad values skipped.
 */
static void test_integration(void)
{
	hwmon_tree();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	hwmon_discover(set, &o, why, sizeof(why));
	struct wb_power p;
	uint64_t t = T0, m = 5000 * MS;
	CHECK_U64(pd_set_sample(set, t, m, &p), 6);
	CHECK(sample_zone(&p, "platform")->energy_uj == 0); /* integrated zones start at 0 */
	CHECK(sample_zone(&p, "package-0")->energy_uj == 1000000);
	CHECK(sample_zone(&p, "platform")->max_energy_range_uj == 0);
	free(p.zones);

	/* 100 ms later, reading 1.3 ms late: the energy follows the grid step */
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 101300000ull, &p), 6);
	CHECK_U64(sample_zone(&p, "platform")->energy_uj, 25000000); /* 250 W * 0.1 s */
	CHECK_U64(sample_zone(&p, "gpu-0")->energy_uj, 4500000);
	CHECK_U64(sample_zone(&p, "gpu-1")->energy_uj, 300000);
	free(p.zones);

	fake_write("sys/class/hwmon/hwmon1/power1_average", "55000000\n");
	fake_write("sys/class/hwmon/hwmon3/energy1_input", "1333333\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 98700000ull, &p), 6);
	CHECK_U64(sample_zone(&p, "gpu-0")->energy_uj,
		  4500000 + 5000000); /* (45 + 55) / 2 W * 0.1 s */
	CHECK_U64(sample_zone(&p, "package-0")->energy_uj, 1333333);
	free(p.zones);

	/* garbage, then a reading far beyond max_power_w: skipped and counted */
	fake_write("sys/class/hwmon/hwmon2/device/power1_average", "n/a\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 5);
	CHECK(sample_zone(&p, "platform") == NULL);
	free(p.zones);
	fake_write("sys/class/hwmon/hwmon2/device/power1_average", "9000000000000\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 5);
	free(p.zones);
	CHECK_U64(set->counts.parse_errors, 1);
	CHECK_U64(set->counts.implausible, 1);
	/* back to 250 W: the 300 ms since the last good reading are bridged */
	fake_write("sys/class/hwmon/hwmon2/device/power1_average", "250000000\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 6);
	CHECK_U64(sample_zone(&p, "platform")->energy_uj, 25000000 + 25000000 + 75000000);
	free(p.zones);
	/* a vanished file */
	fake_remove("sys/class/hwmon/hwmon12/power2_input");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 5);
	CHECK_U64(set->counts.read_errors, 1);
	free(p.zones);
	CHECK_U64(set->counts.zone_samples_skipped, 3);
	pd_set_destroy(&set);
}

static const struct unit_case cases[] = {
    {"zone kinds from labels and device names", test_kinds},
    {"discovery: gpu, ACPI power meter, energy counters, duplicates", test_discovery},
    {"trapezoids on the grid, counters, bad values", test_integration},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
