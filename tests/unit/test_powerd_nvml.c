/*
 * powerd's nvml source against the stand-in libnvidia-ml (tests/fake_nvml.c, built beside this
 * test): zones per GPU, the energy counter in mJ, power integrated where the counter is not
 * supported, the compute processes with their SM time, a GPU lost while the other goes on, and
 * no library.
 */
#include "codec.h"
#include "test_powerd_fake.h"
#include "unit.h"

#define MS 1000000ull
#define T0 (1700000000ull * 1000000000ull)

static char lib[PD_PATH_MAX];

static void script(const char *text)
{
	fake_write("nvml.txt", "%s", text);
}

static struct pd_opts opts(void)
{
	struct pd_opts o = fake_opts();
	fake_set("nvml_library", lib);
	o.interval_ns = 1000 * MS;
	return o;
}

static void test_zones_and_processes(void)
{
	fake_new();
	char path[PD_PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/nvml.txt", fake_root);
	setenv("WB_FAKE_NVML", path, 1);
	script("gpu uuid=GPU-a name=FakeH100 energy_mj=5000 power_mw=300000\n"
	       "gpu uuid=GPU-b name=FakeA10 energy_mj=- power_mw=100000 exclusive=1 mig=1\n"
	       "proc gpu=0 pid=111 sm=60\n"
	       "proc gpu=0 pid=222 sm=-\n"
	       "proc gpu=1 pid=333 sm=90\n");
	struct pd_opts o = opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(nvml_source.discover(set, &o, why, sizeof(why)) == 2);
	set->used |= 1u << pd_source_index(&nvml_source);
	struct wb_msg m = {.kind = WB_POWER};
	CHECK_U64(pd_set_sample(set, T0, 1000 * MS, &m.power), 2);
	const struct wb_power_zone *g0 = sample_zone(&m.power, "gpu-0");
	const struct wb_power_zone *g1 = sample_zone(&m.power, "gpu-1");
	CHECK(g0 && g1);
	if (!g0 || !g1)
		return;
	/* mJ from the driver's counter: the first sample publishes the reading itself */
	CHECK_U64(g0->energy_uj, 5000000);
	CHECK_STR(g0->zone, "gpu");
	CHECK_STR(g0->uuid, "GPU-a");
	CHECK_STR(g0->model, "FakeH100");
	CHECK_STR(g0->vendor, "nvidia");
	CHECK_STR(g0->source, "nvml");
	CHECK(!g0->exclusive && !g0->mig);
	CHECK_U64(g0->n_gpu_procs, 2);
	CHECK_U64(g0->gpu_procs[0].pid, 111);
	CHECK_U64(g0->gpu_procs[0].sm_ns, 600 * MS); /* 60 % of a 1 s interval */
	CHECK_U64(g0->gpu_procs[1].pid, 222);
	CHECK_U64(g0->gpu_procs[1].sm_ns, 0); /* no utilization sample */
	CHECK(g1->exclusive && g1->mig);
	CHECK_U64(g1->energy_uj, 0); /* integrated power starts at 0 */
	CHECK_U64(g1->gpu_procs[0].sm_ns, 900 * MS);
	wb_msg_clear(&m);

	/* 1 s later: +1234 mJ on the counter, 100 W integrated on the other; processes change */
	script("gpu uuid=GPU-a name=FakeH100 energy_mj=6234 power_mw=300000\n"
	       "gpu uuid=GPU-b name=FakeA10 energy_mj=- power_mw=100000 exclusive=1\n"
	       "proc gpu=0 pid=222 sm=40\n");
	m = (struct wb_msg){.kind = WB_POWER};
	CHECK_U64(pd_set_sample(set, T0 + 1000 * MS, 2000 * MS, &m.power), 2);
	g0 = sample_zone(&m.power, "gpu-0");
	g1 = sample_zone(&m.power, "gpu-1");
	CHECK_U64(g0->energy_uj, 6234000);
	CHECK_U64(g0->n_gpu_procs, 1);
	CHECK_U64(g0->gpu_procs[0].pid, 222);
	CHECK_U64(g0->gpu_procs[0].sm_ns, 400 * MS);
	CHECK_U64(g1->energy_uj, 100000000);
	CHECK_U64(g1->n_gpu_procs, 0);
	wb_msg_clear(&m);

	/* GPU 0 lost: counted as a read error, left out; GPU 1 goes on */
	uint64_t errors = set->counts.read_errors;
	script("gpu uuid=GPU-a name=FakeH100 energy_mj=7000 power_mw=300000 lost=1\n"
	       "gpu uuid=GPU-b name=FakeA10 energy_mj=- power_mw=200000\n");
	m = (struct wb_msg){.kind = WB_POWER};
	CHECK_U64(pd_set_sample(set, T0 + 2000 * MS, 3000 * MS, &m.power), 1);
	CHECK(sample_zone(&m.power, "gpu-0") == NULL);
	g1 = sample_zone(&m.power, "gpu-1");
	CHECK_U64(g1->energy_uj, 250000000); /* trapezoid of 100 W and 200 W over 1 s */
	CHECK_U64(set->counts.read_errors, errors + 1);
	wb_msg_clear(&m);
	pd_set_destroy(&set);
	fake_cleanup();
}

/* No library, not NVML, no GPU, no driver: not usable, and why. */
static void test_unusable(void)
{
	fake_new();
	struct pd_opts o = opts();
	char missing[PD_PATH_MAX + 16];
	snprintf(missing, sizeof(missing), "%s/libnvidia-ml.so.1", fake_root);
	fake_set("nvml_library", missing);
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(nvml_source.discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "cannot load") && strstr(why, "nvml_library"));
	/* a library that is not NVML */
	fake_set("nvml_library", "libm.so.6");
	CHECK(nvml_source.discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "libm.so.6 has no nvmlInit_v2") != NULL);
	/* the library loads but sees no GPU */
	char path[PD_PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/nvml.txt", fake_root);
	setenv("WB_FAKE_NVML", path, 1);
	script("\n");
	fake_set("nvml_library", lib);
	CHECK(nvml_source.discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no GPU") != NULL);
	/* no driver: nvmlInit fails */
	unsetenv("WB_FAKE_NVML");
	CHECK(nvml_source.discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "nvmlInit_v2 failed") != NULL);
	CHECK_U64(set->n, 0);
	pd_set_destroy(&set);
	fake_cleanup();
}

static const struct unit_case cases[] = {
    {"nvml: zones, energy counter, power integration, processes, a lost GPU",
     test_zones_and_processes},
    {"nvml: no library, not NVML, no GPU, no driver", test_unusable},
};

int main(void)
{
	const char *b = getenv("WB_BUILD");
	snprintf(lib, sizeof(lib), "%s/tests/libfake-nvml.so", b ? b : "build");
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);
}
