/*
 * powerd's source selection: `source` parsing, the auto order rapl, msr,
 * hwmon, combined sources with unique zone names, mode none, and the minimum
 * safe interval per zone.
 */
#include "test_powerd_fake.h"
#include "unit.h"

static void test_parse_sources(void)
{
	unsigned mask;
	char err[256];
	char *a[] = {"auto"};
	CHECK(detect_parse_sources(a, 1, &mask, err, sizeof(err)) == 0 && mask == 0);
	char *b[] = {"rapl", "hwmon"};
	CHECK(detect_parse_sources(b, 2, &mask, err, sizeof(err)) == 0);
	CHECK_U64(mask,
		  (1u << pd_source_index(&rapl_source)) | (1u << pd_source_index(&hwmon_source)));
	char *c[] = {"rapl", "nvidia"};
	CHECK(detect_parse_sources(c, 2, &mask, err, sizeof(err)) == -1);
	CHECK(strstr(err, "'nvidia'") != NULL);
	char *e[] = {"rapl", "nvml"};
	CHECK(detect_parse_sources(e, 2, &mask, err, sizeof(err)) == 0);
	CHECK_U64(mask,
		  (1u << pd_source_index(&rapl_source)) | (1u << pd_source_index(&nvml_source)));
	char *d[] = {"auto", "msr"};
	CHECK(detect_parse_sources(d, 2, &mask, err, sizeof(err)) == -1);
}

static void tree(bool with_rapl)
{
	fake_new();
	if (with_rapl) {
		fake_rapl_zone("intel-rapl:0", "package-0", 10, 262143328850ull);
		fake_rapl_zone("intel-rapl:0:0", "dram", 20, 65712999613ull);
	}
	fake_write("sys/class/hwmon/hwmon0/name", "zenpower\n");
	fake_write("sys/class/hwmon/hwmon0/power1_input", "50000000\n");
	fake_write("sys/class/hwmon/hwmon0/power1_label", "SVI2_P_Pkg\n");
	fake_write("sys/class/hwmon/hwmon1/name", "power_meter\n");
	fake_write("sys/class/hwmon/hwmon1/power1_average", "300000000\n");
}

static void test_auto_order(void)
{
	tree(true);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	CHECK_U64(detect_open(set, 0), 1); /* rapl works: msr and hwmon are not tried */
	CHECK_U64(set->n, 2);
	char mode[32];
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "rapl");
	pd_set_destroy(&set);

	tree(false);
	o = fake_opts();
	set = pd_set_new(&o);
	CHECK_U64(detect_open(set, 0), 1); /* no rapl, no msr device: hwmon */
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "hwmon");
	CHECK(pd_set_find(set, "package-0") && pd_set_find(set, "platform"));
	pd_set_destroy(&set);
}

static void test_combined(void)
{
	tree(true);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	CHECK_U64(detect_open(set, (1u << pd_source_index(&rapl_source)) |
				       (1u << pd_source_index(&hwmon_source)) |
				       (1u << pd_source_index(&msr_source))),
		  2);
	char mode[32];
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "rapl+hwmon");
	CHECK_U64(set->n, 4);
	/* hwmon's package zone would clash with rapl's: its name says where it comes from */
	const struct pd_zone *z = pd_set_find(set, "package-0-hwmon");
	CHECK(z && z->src == &hwmon_source && !strcmp(z->kind, "package"));
	CHECK(pd_set_find(set, "package-0") && pd_set_find(set, "package-0")->src == &rapl_source);
	pd_set_destroy(&set);
}

static void test_none(void)
{
	fake_new();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	CHECK_U64(detect_open(set, 0), 0);
	char mode[32];
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "none");
	struct wb_power p;
	CHECK_U64(pd_set_sample(set, 1, 1, &p), 0);
	CHECK(p.zones == NULL);
	pd_set_destroy(&set);
}

static void test_min_safe_interval(void)
{
	struct pd_zone z;
	pd_zone_init(&z, &rapl_source, "package", 0);
	counter_init(&z.ctr, 262143328850ull + 1, 1, 1, 0);
	CHECK_NEAR(pd_zone_min_safe_s(&z, 5000), 52.43, 0.01);
	CHECK_NEAR(pd_zone_min_safe_s(&z, 500), 524.29, 0.01);
	counter_init(&z.ctr, 1ull << 32, 153, 10, 0); /* server DRAM, 15.3 uJ */
	CHECK_NEAR(pd_zone_min_safe_s(&z, 5000), 13.14, 0.01);
	counter_init(&z.ctr, 0, 1, 1, 0);
	CHECK_NEAR(pd_zone_min_safe_s(&z, 5000), 0, 0);
}

/* [powerd] is powerd's own keys and every source's, from the table of sources: each source's
 * keys set its own settings, `source`'s help names every source, and a source's keys given
 * with source = auto are found (detect_open says so). */
static void test_keys_from_sources(void)
{
	size_t size;
	const struct wb_conf_section *sec = pd_conf_section(&size);
	CHECK(wb_conf_find(sec, "pub") && wb_conf_find(sec, "interval"));
	size_t own = 0;
	for (unsigned s = 0; s < pd_nsources; s++) {
		const struct pd_source *src = pd_sources[s];
		for (size_t i = 0; i < src->nkeys; i++)
			CHECK(wb_conf_find(sec, src->keys[i].name) != NULL);
		own += src->nkeys;
	}
	CHECK(own >= 18 && sec->nkeys == own + 5);
	const struct wb_conf_key *k = wb_conf_find(sec, "source");
	for (unsigned s = 0; s < pd_nsources; s++)
		CHECK(strstr(k->help, pd_sources[s]->name) != NULL);
	CHECK(strstr(k->help, "auto (the first usable of rapl, msr, hwmon)") != NULL);
	CHECK(strstr(k->help, "fake (simulated from the CPU load") != NULL);

	fake_new();
	struct pd_opts o = fake_opts();
	char keys[256];
	CHECK(pd_conf_source_set(o.conf, &exec_source, keys, sizeof(keys)) == 0);
	CHECK(pd_conf_source_set(o.conf, &msr_source, keys, sizeof(keys)) == 1); /* msr_root */
	CHECK_STR(keys, "msr_root");
	fake_set("exec", "echo x 1 uj");
	fake_set("exec_timeout", "3s");
	CHECK(pd_conf_source_set(o.conf, &exec_source, keys, sizeof(keys)) == 2);
	CHECK_STR(keys, "exec, exec_timeout");
	/* a source's settings are where its own code finds them, not another's */
	fake_set("redfish_url", "https://bmc.example");
	char err[256];
	CHECK(redfish_source.check(&o, err, sizeof(err)) < 0);
	CHECK(strstr(err, "redfish_credentials") != NULL);
	fake_set("redfish_credentials", "/etc/wattbus/bmc");
	CHECK(redfish_source.check(&o, err, sizeof(err)) == 0);
	CHECK(exec_source.check(&o, err, sizeof(err)) == 0);
	fake_set("exec", "");
	CHECK(exec_source.check(&o, err, sizeof(err)) < 0);
}

static const struct unit_case cases[] = {
    {"source list", test_parse_sources},
    {"auto: rapl first, else hwmon", test_auto_order},
    {"several sources, unique names", test_combined},
    {"no meter: mode none, no zones", test_none},
    {"minimum safe interval", test_min_safe_interval},
    {"[powerd]'s keys come from the sources' rows", test_keys_from_sources},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
