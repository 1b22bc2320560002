/*
 * powerd's msr source on files laid out like /dev/cpu/N/msr (register number =
 * file offset): Intel two-socket with DRAM and psys, AMD, the energy units and
 * the kernel's model quirks, and a 32-bit wrap.
 */
#include <fcntl.h>

#include "test_powerd_fake.h"
#include "unit.h"

#define MS 1000000ull
#define T0 (1700000000ull * 1000000000ull)

static void cpu_topology(unsigned cpu, unsigned pkg)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%u/topology/physical_package_id",
		 cpu);
	fake_write(rel, "%u\n", pkg);
	snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%u/topology/die_id", cpu);
	fake_write(rel, "0\n");
}

/* Skylake-X (model 85), two sockets, cpus 0-1 on package 0 and 2-3 on package 1. */
static void intel_layout(unsigned model)
{
	fake_new();
	fake_write("cpuinfo",
		   "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: %u\n"
		   "model name\t: Intel(R) Xeon(R)\n",
		   model);
	for (unsigned c = 0; c < 4; c++)
		cpu_topology(c, c / 2);
	fake_write("sys/devices/system/cpu/online", "0-3\n");
	for (unsigned c = 0; c < 4; c += 2) {
		char rel[64];
		snprintf(rel, sizeof(rel), "dev/cpu/%u/msr", c);
		fake_msr(rel, 0x606, 0xa0e03);	/* ESU 14: 61.035 uJ */
		fake_msr(rel, 0x611, 1000 + c); /* package */
		fake_msr(rel, 0x639, 2000 + c); /* core */
		fake_msr(rel, 0x641, 0);	/* uncore: reads 0, not implemented */
		fake_msr(rel, 0x619,
			 0xfffffff0ull | (7ull << 32)); /* dram; high bits are reserved */
		if (c == 0)
			fake_msr(rel, 0x64d, 50); /* psys */
	}
}

static void test_cpuinfo_and_units(void)
{
	intel_layout(0x55);
	struct pd_opts o = fake_opts();
	struct pd_cpu_id id;
	CHECK(msr_cpu_id(o.cpuinfo_path, &id) == 0);
	CHECK(id.vendor == PD_CPU_INTEL && id.family == 6 && id.model == 0x55);
	struct pd_unit pkg, dram, psys;
	msr_units(&id, 14, &pkg, &dram, &psys);
	CHECK(pkg.mul == 1000000 && pkg.div == 16384);
	CHECK(dram.mul == 153 && dram.div == 10); /* 15.3 uJ as the kernel */
	CHECK(psys.mul == 1000000 && psys.div == 16384);
	id.model = 0x8f; /* Sapphire Rapids: psys in joules */
	msr_units(&id, 14, &pkg, &dram, &psys);
	CHECK(psys.mul == 1000000 && psys.div == 1);
	id.model = 0x9e; /* a client part: everything in the register's unit */
	msr_units(&id, 14, &pkg, &dram, &psys);
	CHECK(dram.mul == 1000000 && dram.div == 16384);
	id = (struct pd_cpu_id){.vendor = PD_CPU_AMD, .family = 25, .model = 1};
	msr_units(&id, 16, &pkg, &dram, &psys);
	CHECK(pkg.mul == 1000000 && pkg.div == 65536 && dram.div == 65536);
	fake_write("cpuinfo",
		   "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n");
	CHECK(msr_cpu_id(o.cpuinfo_path, &id) == 0 && id.vendor == PD_CPU_AMD && id.family == 25 &&
	      id.model == 17);
	CHECK(msr_cpu_id("/nonexistent/cpuinfo", &id) == -1);
}

static void test_intel_discovery(void)
{
	intel_layout(0x55);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	int n = msr_discover(set, &o, why, sizeof(why));
	CHECK(n == 7); /* package, core, dram per socket, psys once; uncore reads 0 */
	if (n != 7)
		printf("#   why: %s\n", why);
	CHECK(pd_set_find(set, "uncore-0") == NULL);
	const struct pd_zone *z = pd_set_find(set, "package-1");
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/dev/cpu/2/msr:0x611", fake_root);
	CHECK(z && !strcmp(z->path, path) && z->index == 1 && z->src == &msr_source);
	CHECK(pd_set_find(set, "psys") && pd_set_find(set, "core-0") && pd_set_find(set, "dram-1"));
	/* each zone's descriptor stays out of exec children (dup() would clear close-on-exec) */
	for (size_t i = 0; i < set->n; i++) {
		int fl = fcntl(set->zones[i].fd, F_GETFD);
		CHECK(fl >= 0 && (fl & FD_CLOEXEC));
	}

	struct wb_power p;
	CHECK_U64(pd_set_sample(set, T0, 1000 * MS, &p), 7);
	const struct wb_power_zone *pz = sample_zone(&p, "package-0");
	/* 1000 ticks of 1/2^14 J */
	CHECK(pz && pz->energy_uj == 1000ull * 1000000 / 16384 && !strcmp(pz->source, "msr"));
	CHECK(pz && pz->max_energy_range_uj == 0xffffffffull * 1000000 / 16384);
	pz = sample_zone(&p, "dram-0");
	/* the reserved high half is ignored; 15.3 uJ per tick */
	CHECK(pz && pz->energy_uj == 0xfffffff0ull * 153 / 10);
	free(p.zones);

	/* dram wraps at 2^32: 0xfffffff0 -> 0x10 is 32 ticks */
	char rel[64];
	snprintf(rel, sizeof(rel), "dev/cpu/0/msr");
	fake_msr(rel, 0x619, 0x10);
	fake_msr(rel, 0x611, 1000 + 16384); /* one joule */
	CHECK_U64(pd_set_sample(set, T0 + 100 * MS, 1100 * MS, &p), 7);
	pz = sample_zone(&p, "dram-0");
	CHECK(pz && pz->energy_uj == (0xfffffff0ull + 32) * 153 / 10);
	pz = sample_zone(&p, "package-0");
	CHECK(pz && pz->energy_uj == (1000ull + 16384) * 1000000 / 16384);
	CHECK_U64(set->counts.wraps, 1);
	free(p.zones);
	pd_set_destroy(&set);

	/* an explicit DRAM unit */
	fake_set("msr_dram_unit_nj", "61035");
	set = pd_set_new(&o);
	msr_discover(set, &o, why, sizeof(why));
	CHECK_U64(pd_set_sample(set, T0, 1000 * MS, &p), 7);
	pz = sample_zone(&p, "dram-1");
	CHECK(pz && pz->energy_uj == 0xfffffff0ull * 61035 / 1000);
	free(p.zones);
	pd_set_destroy(&set);
}

static void test_amd(void)
{
	fake_new();
	fake_write("cpuinfo",
		   "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n");
	cpu_topology(0, 0);
	cpu_topology(1, 0);
	/*
	 * AMD's registers are numbered one apart, so in a file their 8-byte values
	 * overlap: the package counter written at 0xc001029b covers bytes 2-7 of
	 * the unit register, leaving its ESU (bits 12:8) intact.
	 */
	fake_msr("dev/cpu/0/msr", 0xc0010299, 0xa1003); /* ESU 16: 15.26 uJ */
	fake_msr("dev/cpu/0/msr", 0xc001029b, 0xffffff00u);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(msr_discover(set, &o, why, sizeof(why)) == 1);
	const struct pd_zone *z = pd_set_find(set, "package-0");
	CHECK(z && strstr(z->path, "0xc001029b"));
	struct wb_power p;
	pd_set_sample(set, T0, 1000 * MS, &p);
	free(p.zones);
	fake_msr("dev/cpu/0/msr", 0xc001029b, 0x100);
	CHECK_U64(pd_set_sample(set, T0 + 100 * MS, 1100 * MS, &p), 1);
	/* (0xffffff00 + 0x200) ticks of 1/2^16 J */
	CHECK(p.n_zones && p.zones[0].energy_uj == (0xffffff00ull + 0x200) * 1000000 / 65536);
	free(p.zones);
	/* vendor from the registers when cpuinfo is missing */
	o.cpuinfo_path = "/nonexistent";
	pd_set_destroy(&set);
	set = pd_set_new(&o);
	CHECK(msr_discover(set, &o, why, sizeof(why)) == 1);
	pd_set_destroy(&set);
}

static void test_failures(void)
{
	fake_new();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	/* no topology, no msr device: cpu 0 is tried and the driver named */
	CHECK(msr_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "/dev/cpu/0/msr") != NULL);
	CHECK(strstr(why, "modprobe msr") != NULL);
	/* a device without RAPL registers */
	fake_msr("dev/cpu/0/msr", 0x10, 12345);
	why[0] = '\0';
	CHECK(msr_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no RAPL") != NULL);
	/* a register that stops reading is a skipped sample, not a crash */
	fake_msr("dev/cpu/0/msr", 0x606, 0xa0e03);
	fake_msr("dev/cpu/0/msr", 0x611, 5);
	CHECK(msr_discover(set, &o, why, sizeof(why)) == 1);
	struct wb_power p;
	CHECK_U64(pd_set_sample(set, T0, 1000 * MS, &p), 1);
	free(p.zones);
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/dev/cpu/0/msr", fake_root);
	CHECK(truncate(path, 0x611) == 0);
	CHECK_U64(pd_set_sample(set, T0 + 100 * MS, 1100 * MS, &p), 0);
	CHECK_U64(set->counts.read_errors, 1);
	free(p.zones);
	pd_set_destroy(&set);
}

static const struct unit_case cases[] = {
    {"cpuinfo and the kernel's unit quirks", test_cpuinfo_and_units},
    {"Intel two-socket registers, units, 32-bit wrap", test_intel_discovery},
    {"AMD registers", test_amd},
    {"missing driver, no RAPL, register gone", test_failures},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
