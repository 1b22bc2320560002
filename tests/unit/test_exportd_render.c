/*
 * exportd's /metrics text: exact numbers, escaping, Kepler's label sets, the
 * level and name filters, gzip, and kepler_node_cpu_info from parsed cpuinfo (lib/cpuinfo.c,
 * tests/unit/test_cpuinfo.c).
 */
#include "unit.h"

#include <zlib.h>

#include "codec.h"
#include "../../exportd/exportd.h"

#define S 1000000000ull

static char *text(struct rbuf *b)
{
	rbuf_putc(b, '\0');
	return b->p;
}

static void test_numbers(void)
{
	struct rbuf b = {0};
	rbuf_fixed(&b, 1234567, 6);
	rbuf_putc(&b, ' ');
	rbuf_fixed(&b, 5, 6);
	rbuf_putc(&b, ' ');
	rbuf_fixed(&b, 0, 9);
	rbuf_putc(&b, ' ');
	rbuf_fixed(&b, UINT64_MAX, 6);
	rbuf_putc(&b, ' ');
	rbuf_u64(&b, 0);
	rbuf_putc(&b, ' ');
	rbuf_double(&b, 0.375);
	CHECK_STR(text(&b), "1.234567 0.000005 0.000000000 18446744073709.551615 0 0.375");
	rbuf_free(&b);
}

static void test_label_escaping(void)
{
	struct rbuf b = {0};
	/* quote, backslash, newline; a lone continuation byte, an overlong '/', a surrogate, then
	 * valid UTF-8 */
	rbuf_label(&b, true, "comm",
		   "a\"b\\c\nd\x80"
		   "e\xc0\xaf"
		   "f\xed\xa0\x80"
		   "g\xc3\xa9\xe2\x82\xac",
		   64);
	CHECK_STR(text(&b), "comm=\"a\\\"b\\\\c\\nd\xef\xbf\xbd"
			    "e\xef\xbf\xbd\xef\xbf\xbd"
			    "f\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
			    "g\xc3\xa9\xe2\x82\xac\"");
	rbuf_reset(&b);
	/* maxlen bounds a field that is not NUL-terminated; a sequence cut by it is invalid */
	rbuf_label_value(&b, "abc\xc3\xa9", 4);
	CHECK_STR(text(&b), "abc\xef\xbf\xbd");
	rbuf_free(&b);
}

/* Inflate a gzip member; NULL unless it is whole and holds exactly want bytes. */
static char *gunzip(const struct rbuf *z, size_t want)
{
	char *out = malloc(want + 1);
	z_stream zs = {0};
	if (!out || inflateInit2(&zs, 15 + 16) != Z_OK) {
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *)z->p;
	zs.avail_in = (uInt)z->len;
	zs.next_out = (Bytef *)out;
	zs.avail_out = (uInt)want + 1;
	bool ok = inflate(&zs, Z_FINISH) == Z_STREAM_END && zs.total_out == want;
	inflateEnd(&zs);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

/*
 * Text written after rbuf_gzip_begin comes out of rbuf_gzip_end as one gzip
 * member of the same bytes, and is never held whole: the buffer stays within
 * RBUF_GZ_CHUNK however much is written (1.1 MB of lines here, and a 600 kB
 * piece in one rbuf_put, which goes to zlib from where it lies).
 */
static void test_gzip_round_trip(void)
{
	struct rbuf in = {0}, z = {0};
	CHECK(rbuf_gzip_begin(&z, 1) == 0);
	size_t most = 0;
	for (int i = 0; i < 20000; i++) {
		rbuf_printf(&in, "kepler_process_cpu_joules_total{pid=\"%d\"} %d.000000\n", i,
			    i * 7);
		rbuf_printf(&z, "kepler_process_cpu_joules_total{pid=\"%d\"} %d.000000\n", i,
			    i * 7);
		if (z.cap > most)
			most = z.cap;
	}
	size_t big = 600000;
	char *piece = malloc(big);
	for (size_t i = 0; i < big; i++)
		piece[i] = (char)('a' + (i * 7919) % 26);
	rbuf_put(&in, piece, big);
	rbuf_put(&z, piece, big);
	rbuf_puts(&in, "# EOF\n");
	rbuf_puts(&z, "# EOF\n");
	CHECK(in.len > 4 * RBUF_GZ_CHUNK);
	CHECK(most <= RBUF_GZ_CHUNK + 4096);
	CHECK(rbuf_gzip_end(&z) == 0 && !z.oom && z.gz == NULL);
	CHECK(z.len > 18 && z.len < in.len);
	CHECK((unsigned char)z.p[0] == 0x1f && (unsigned char)z.p[1] == 0x8b);
	char *out = gunzip(&z, in.len);
	CHECK(out && memcmp(out, in.p, in.len) == 0);
	free(out);
	free(piece);
	rbuf_free(&z);

	/* Nothing written: an empty member, which inflates to nothing. */
	CHECK(rbuf_gzip_begin(&z, 6) == 0);
	CHECK(rbuf_gzip_end(&z) == 0 && z.len > 18);
	out = gunzip(&z, 0);
	CHECK(out != NULL);
	free(out);
	rbuf_free(&z);
	/* Freed in the middle: no leak (valgrind/ASan runs of this test see it). */
	CHECK(rbuf_gzip_begin(&z, 1) == 0);
	rbuf_put(&z, in.p, in.len);
	rbuf_free(&z);
	CHECK(z.gz == NULL && z.p == NULL);
	rbuf_free(&in);
}

/* One host, one zone "package", a process, a container, a pod, a VM. */
static struct accum *fixture(void)
{
	struct accum_limits lim = {.levels = EX_LEVELS_ALL,
				   .max_series = 1000,
				   .max_terminated = 10,
				   .terminated_ttl_ns = 600 * S,
				   .stale_after_ns = 300 * S,
				   .max_hosts = 4};
	struct accum *a = accum_new(&lim);
	for (int slot = 0; slot < 2; slot++) {
		struct wb_msg m = {.kind = WB_ESTIMATE};
		struct wb_estimate *e = &m.estimate;
		snprintf(e->env.host, sizeof e->env.host, "node-a");
		e->t0 = (100 + 2 * (uint64_t)slot) * S;
		e->t1 = e->t0 + 2 * S; /* 2 s slots */
		e->cpu_usage_ratio = 0.5;
		e->n_zones = 1;
		e->zones = wb_array_new(1, sizeof *e->zones);
		snprintf(e->zones[0].zone, 16, "package");
		snprintf(e->zones[0].name, 64, "package-0");
		snprintf(e->zones[0].path, 256, "/sys/class/powercap/intel-rapl:0");
		e->zones[0].energy_uj = 20000000; /* 10 W */
		e->zones[0].active_uj = 8000000;
		e->zones[0].idle_uj = 12000000;
		e->n_procs = 1;
		e->procs = wb_array_new(1, sizeof *e->procs);
		e->procs[0].pid = 42;
		snprintf(e->procs[0].comm, 16, "stress");
		snprintf(e->procs[0].container_id, 128, "c1");
		e->procs[0].cpu_ns = 1500000000;
		e->procs[0].n_energy_uj = 1;
		e->procs[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
		e->procs[0].energy_uj[0] = 3000000; /* 1.5 W */
		e->n_containers = e->n_pods = e->n_vms = 1;
		e->containers = wb_array_new(1, sizeof(struct wb_est_group));
		e->pods = wb_array_new(1, sizeof(struct wb_est_group));
		e->vms = wb_array_new(1, sizeof(struct wb_est_group));
		struct wb_est_group *gs[3] = {e->containers, e->pods, e->vms};
		const char *ids[3] = {"c1", "p1", "v1"};
		for (int g = 0; g < 3; g++) {
			snprintf(gs[g]->id, 128, "%s", ids[g]);
			gs[g]->cpu_ns = 1500000000;
			gs[g]->n_energy_uj = 1;
			gs[g]->energy_uj = wb_array_new(1, sizeof(uint64_t));
			gs[g]->energy_uj[0] = 3000000;
		}
		snprintf(e->containers[0].name, 128, "web");
		snprintf(e->containers[0].pod_uid, 64, "p1");
		snprintf(e->containers[0].runtime, 16, "docker");
		snprintf(e->pods[0].name, 128, "web-7d9");
		snprintf(e->vms[0].runtime, 16, "libvirt");
		CHECK(accum_add(a, e, NULL) == 0);
		wb_msg_clear(&m);
	}
	return a;
}

static char *render_all(const struct accum *a, const struct stages *st,
			const struct render_filter *f)
{
	static struct rbuf b;
	rbuf_free(&b);
	struct wb_cpuinfo_cpu cpu = {.processor = "0",
				     .vendor_id = "GenuineIntel",
				     .model_name = "Xeon \"Gold\"",
				     .physical_id = "0",
				     .core_id = "0"};
	struct render_input in = {.acc = a,
				  .st = st,
				  .cpus = &cpu,
				  .ncpus = 1,
				  .now_ns = 200 * S,
				  .stage_timeout_ns = 15 * S,
				  .version = "0.1.0",
				  .arch = "amd64",
				  .compiler = "gcc 12"};
	render_metrics(&in, f, &b);
	return text(&b);
}

#define HAS(out, line) CHECK(strstr(out, line "\n") != NULL)
#define HASNOT(out, s) CHECK(strstr(out, s) == NULL)

static void test_kepler_families(void)
{
	struct accum *a = fixture();
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	char *out = render_all(a, NULL, &all);
	const char *node =
	    "{node_name=\"node-a\",zone=\"package\",path=\"/sys/class/powercap/intel-rapl:0\"}";
	char line[512];
	snprintf(line, sizeof line, "kepler_node_cpu_joules_total%s 40.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	snprintf(line, sizeof line, "kepler_node_cpu_active_joules_total%s 16.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	snprintf(line, sizeof line, "kepler_node_cpu_idle_joules_total%s 24.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	snprintf(line, sizeof line, "kepler_node_cpu_watts%s 10.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	snprintf(line, sizeof line, "kepler_node_cpu_active_watts%s 4.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	snprintf(line, sizeof line, "kepler_node_cpu_idle_watts%s 6.000000\n", node);
	CHECK(strstr(out, line) != NULL);
	HAS(out, "# TYPE kepler_node_cpu_joules_total counter");
	HAS(out, "# TYPE kepler_node_cpu_watts gauge");
	HAS(out, "kepler_node_cpu_usage_ratio{node_name=\"node-a\"} 0.5");
	HAS(out,
	    "kepler_node_cpu_info{processor=\"0\",vendor_id=\"GenuineIntel\",model_name=\"Xeon \\\"Gold\\\"\",physical_id=\"0\",core_id=\"0\"} 1");
	HAS(out,
	    "kepler_process_cpu_joules_total{node_name=\"node-a\",pid=\"42\",comm=\"stress\",exe=\"\",type=\"container\",container_id=\"c1\",vm_id=\"\",state=\"running\",zone=\"package\"} 6.000000");
	HAS(out,
	    "kepler_process_cpu_watts{node_name=\"node-a\",pid=\"42\",comm=\"stress\",exe=\"\",type=\"container\",container_id=\"c1\",vm_id=\"\",state=\"running\",zone=\"package\"} 1.500000");
	HAS(out,
	    "kepler_process_cpu_seconds_total{node_name=\"node-a\",pid=\"42\",comm=\"stress\",exe=\"\",type=\"container\",container_id=\"c1\",vm_id=\"\"} 3.000000000");
	HAS(out,
	    "kepler_container_cpu_joules_total{node_name=\"node-a\",container_id=\"c1\",container_name=\"web\",runtime=\"docker\",pod_id=\"p1\",state=\"running\",zone=\"package\"} 6.000000");
	HAS(out,
	    "kepler_container_cpu_seconds_total{node_name=\"node-a\",container_id=\"c1\",container_name=\"web\",runtime=\"docker\",pod_id=\"p1\",state=\"running\"} 3.000000000");
	HAS(out,
	    "kepler_pod_cpu_watts{node_name=\"node-a\",pod_id=\"p1\",pod_name=\"web-7d9\",pod_namespace=\"\",state=\"running\",zone=\"package\"} 1.500000");
	HAS(out,
	    "kepler_vm_cpu_joules_total{node_name=\"node-a\",vm_id=\"v1\",vm_name=\"v1\",hypervisor=\"kvm\",state=\"running\",zone=\"package\"} 6.000000");
	HAS(out,
	    "kepler_build_info{arch=\"amd64\",branch=\"\",revision=\"\",version=\"0.1.0\",goversion=\"gcc 12\"} 1");
	HASNOT(out, "wattbus_stage_up");
	accum_destroy(&a);
}

/* Two GPUs beside a package zone: Kepler's GPU families and labels, never aggregated, and kept
 * out of the cpu families; workloads per GPU. */
static void test_gpu_families(void)
{
	struct accum_limits lim = {.levels = EX_LEVELS_ALL,
				   .max_series = 1000,
				   .max_terminated = 10,
				   .terminated_ttl_ns = 600 * S,
				   .stale_after_ns = 300 * S,
				   .max_hosts = 4};
	struct accum *a = accum_new(&lim);
	struct wb_msg m = {.kind = WB_ESTIMATE};
	struct wb_estimate *e = &m.estimate;
	snprintf(e->env.host, sizeof e->env.host, "node-g");
	e->t0 = 100 * S;
	e->t1 = 102 * S;
	e->n_zones = 3;
	e->zones = wb_array_new(3, sizeof *e->zones);
	snprintf(e->zones[0].zone, 16, "package");
	snprintf(e->zones[0].name, 64, "package-0");
	snprintf(e->zones[0].path, 256, "/sys/class/powercap/intel-rapl:0");
	e->zones[0].energy_uj = e->zones[0].idle_uj = 20000000;
	for (int g = 1; g <= 2; g++) {
		struct wb_est_zone *z = &e->zones[g];
		snprintf(z->zone, 16, "gpu");
		snprintf(z->name, 64, "gpu-%d", g - 1);
		snprintf(z->path, 256, "nvml:GPU-%d", g - 1);
		snprintf(z->uuid, sizeof z->uuid, "GPU-%d", g - 1);
		snprintf(z->model, sizeof z->model, "NVIDIA H100");
		snprintf(z->vendor, sizeof z->vendor, "nvidia");
		z->index = (uint64_t)g - 1;
		z->energy_uj = 400000000ull * (uint64_t)g; /* 200 W, 400 W */
		z->idle_uj = 100000000;
		z->active_uj = z->energy_uj - z->idle_uj;
		z->idle_w = 50;
	}
	e->zones[2].unattributed_uj = e->zones[2].active_uj - 100000000;
	e->n_procs = 1;
	e->procs = wb_array_new(1, sizeof *e->procs);
	e->procs[0].pid = 42;
	snprintf(e->procs[0].comm, 16, "train");
	e->procs[0].n_energy_uj = 3;
	e->procs[0].energy_uj = wb_array_new(3, sizeof(uint64_t));
	e->procs[0].energy_uj[1] = 300000000;
	e->procs[0].energy_uj[2] = 100000000;
	CHECK(accum_add(a, e, NULL) == 0);
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	char *out = render_all(a, NULL, &all);
	HAS(out,
	    "kepler_node_gpu_info{node_name=\"node-g\",gpu=\"1\",gpu_uuid=\"GPU-1\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 1");
	HAS(out,
	    "kepler_node_gpu_joules_total{node_name=\"node-g\",gpu=\"0\",gpu_uuid=\"GPU-0\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 400.000000");
	HAS(out,
	    "kepler_node_gpu_joules_total{node_name=\"node-g\",gpu=\"1\",gpu_uuid=\"GPU-1\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 800.000000");
	HAS(out,
	    "kepler_node_gpu_watts{node_name=\"node-g\",gpu=\"1\",gpu_uuid=\"GPU-1\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 400.000000");
	HAS(out,
	    "kepler_node_gpu_active_joules_total{node_name=\"node-g\",gpu=\"0\",gpu_uuid=\"GPU-0\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 300.000000");
	HAS(out,
	    "kepler_node_gpu_idle_watts{node_name=\"node-g\",gpu=\"0\",gpu_uuid=\"GPU-0\",gpu_name=\"NVIDIA H100\",vendor=\"nvidia\"} 50");
	HAS(out, "# TYPE kepler_node_gpu_joules_total counter");
	HAS(out,
	    "kepler_process_gpu_joules_total{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\"} 400.000000");
	HAS(out,
	    "kepler_process_gpu_watts{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\"} 200.000000");
	/* one series per process over its GPUs, as Kepler's: no gpu or vendor label on it */
	HASNOT(
	    out,
	    "kepler_process_gpu_joules_total{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\",");
	HASNOT(out, "vendor=\"nvidia\"} 0.000000");
	HAS(out,
	    "kepler_process_cpu_joules_total{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\",zone=\"package\"} 0.000000");
	/* GPUs are neither aggregated nor in the cpu families */
	HASNOT(out, "aggregated-gpu");
	HASNOT(out, "zone=\"gpu\"");
	/* Kepler 0.9: per GPU (its index as package) at node level, summed over GPUs per workload
	 */
	struct render_filter k9 = {.profiles = 1u << EX_PROF_KEPLER09, .levels = EX_LEVELS_ALL};
	out = render_all(a, NULL, &k9);
	HAS(out,
	    "kepler_node_gpu_joules_total{node_name=\"node-g\",package=\"1\",instance=\"node-g\",mode=\"dynamic\",source=\"NVML\"} 700.000000");
	HAS(out,
	    "kepler_node_gpu_joules_total{node_name=\"node-g\",package=\"1\",instance=\"node-g\",mode=\"idle\",source=\"NVML\"} 100.000000");
	HAS(out,
	    "kepler_process_gpu_joules_total{node_name=\"node-g\",pid=\"42\",container_id=\"\",vm_id=\"\",command=\"train\",mode=\"dynamic\",source=\"NVML\"} 400.000000");
	/* package + dram + other + gpu */
	HAS(out,
	    "kepler_process_joules_total{node_name=\"node-g\",pid=\"42\",container_id=\"\",vm_id=\"\",command=\"train\",mode=\"dynamic\"} 400.000000");
	/* beside the 0.10 profile the GPU families are Kepler HEAD's alone */
	k9.profiles |= 1u << EX_PROF_KEPLER;
	out = render_all(a, NULL, &k9);
	HASNOT(out, "source=\"NVML\"");
	HAS(out,
	    "kepler_process_gpu_joules_total{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\"} 400.000000");
	/* a slot without GPU use: the process keeps its joules, its GPU watts go (Kepler exports
	 * them only while it uses a GPU) */
	e->t0 = 102 * S;
	e->t1 = 104 * S;
	e->procs[0].energy_uj[1] = e->procs[0].energy_uj[2] = 0;
	e->zones[1].unattributed_uj = e->zones[1].active_uj;
	e->zones[2].unattributed_uj = e->zones[2].active_uj;
	CHECK(accum_add(a, e, NULL) == 0);
	wb_msg_clear(&m);
	out = render_all(a, NULL, &all);
	HAS(out,
	    "kepler_process_gpu_joules_total{node_name=\"node-g\",pid=\"42\",comm=\"train\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\"} 400.000000");
	HASNOT(out, "kepler_process_gpu_watts{");
	accum_destroy(&a);
	/* a host without GPUs has no GPU families at all */
	a = fixture();
	out = render_all(a, NULL, &all);
	HASNOT(out, "kepler_node_gpu");
	HASNOT(out, "_gpu_");
	accum_destroy(&a);
}

/* Kepler 0.9's families (metrics = kepler-0.9) from the same accumulators: names, labels,
 * types, and figures that add up to the 0.10 ones. */
static void test_kepler09_families(void)
{
	struct accum *a = fixture();
	struct render_filter k9 = {.profiles = 1u << EX_PROF_KEPLER09, .levels = EX_LEVELS_ALL};
	char *out = render_all(a, NULL, &k9);
	if (getenv("WB_SHOW"))
		fputs(out, stderr);
	/* 2 slots of 20 J, 8 J active: dynamic 16 J, idle 24 J, as the 0.10 active/idle counters */
	HAS(out, "# TYPE kepler_node_package_joules_total counter");
	HAS(out,
	    "kepler_node_package_joules_total{node_name=\"node-a\",package=\"0\",instance=\"node-a\",mode=\"dynamic\",source=\"rapl-sysfs\"} 16.000000");
	HAS(out,
	    "kepler_node_package_joules_total{node_name=\"node-a\",package=\"0\",instance=\"node-a\",mode=\"idle\",source=\"rapl-sysfs\"} 24.000000");
	/* no dram zone: 0 J per package zone, as Kepler 0.9 reads all four RAPL components per
	 * socket; no platform zone: no platform series */
	HAS(out,
	    "kepler_node_dram_joules_total{node_name=\"node-a\",package=\"0\",instance=\"node-a\",mode=\"dynamic\",source=\"rapl-sysfs\"} 0.000000");
	HAS(out,
	    "kepler_node_uncore_joules_total{node_name=\"node-a\",package=\"0\",instance=\"node-a\",mode=\"idle\",source=\"rapl-sysfs\"} 0.000000");
	HASNOT(out, "kepler_node_platform_joules_total");
	HASNOT(out, "kepler_node_other_joules_total");
	HAS(out,
	    "kepler_process_package_joules_total{node_name=\"node-a\",pid=\"42\",container_id=\"c1\",vm_id=\"\",command=\"stress\",mode=\"dynamic\",source=\"rapl-sysfs\"} 6.000000");
	/* every component per workload, as Kepler 0.9 (0 J where there is none) */
	HAS(out,
	    "kepler_process_dram_joules_total{node_name=\"node-a\",pid=\"42\",container_id=\"c1\",vm_id=\"\",command=\"stress\",mode=\"dynamic\",source=\"rapl-sysfs\"} 0.000000");
	/* the eBPF page-cache counter Kepler's BPFOnly trainers need: wattbus counts none */
	HAS(out, "# TYPE kepler_process_bpf_page_cache_hit_total counter");
	HAS(out,
	    "kepler_process_bpf_page_cache_hit_total{node_name=\"node-a\",pid=\"42\",container_id=\"c1\",vm_id=\"\",command=\"stress\",source=\"bpf\"} 0.000000");
	HAS(out,
	    "kepler_process_joules_total{node_name=\"node-a\",pid=\"42\",container_id=\"c1\",vm_id=\"\",command=\"stress\",mode=\"dynamic\"} 6.000000");
	HAS(out,
	    "kepler_process_bpf_cpu_time_ms_total{node_name=\"node-a\",pid=\"42\",container_id=\"c1\",vm_id=\"\",command=\"stress\",source=\"bpf\"} 3000.000000");
	/* the container's pod by its uid: the pod's name as kepler_pod_* shows it */
	HAS(out,
	    "kepler_container_package_joules_total{node_name=\"node-a\",container_id=\"c1\",pod_name=\"web-7d9\",container_namespace=\"system\",container_name=\"web\",mode=\"dynamic\",source=\"rapl-sysfs\"} 6.000000");
	HAS(out,
	    "kepler_container_joules_total{node_name=\"node-a\",container_id=\"c1\",pod_name=\"web-7d9\",container_namespace=\"system\",container_name=\"web\",mode=\"dynamic\"} 6.000000");
	HAS(out,
	    "kepler_container_bpf_cpu_time_ms_total{node_name=\"node-a\",container_id=\"c1\",pod_name=\"web-7d9\",container_namespace=\"system\",container_name=\"web\",source=\"bpf\"} 3000.000000");
	HAS(out,
	    "kepler_vm_package_joules_total{node_name=\"node-a\",vm_id=\"v1\",mode=\"dynamic\",source=\"rapl-sysfs\"} 6.000000");
	HAS(out,
	    "kepler_vm_bpf_cpu_time_ms_total{node_name=\"node-a\",vm_id=\"v1\",source=\"bpf\"} 3000.000000");
	HASNOT(out, "kepler_vm_joules_total"); /* Kepler 0.9 has none */
	HASNOT(out, "kepler_pod_");
	HAS(out,
	    "kepler_node_info{node_name=\"node-a\",cpu_architecture=\"xeon_\\\"gold\\\"\",components_power_source=\"rapl-sysfs\",platform_power_source=\"\",source=\"os\"} 1");
	HAS(out,
	    "kepler_node_node_info{vendor=\"genuineintel\",processor=\"xeon_\\\"gold\\\"\",cores=\"1\",chips=\"1\",threads_per_core=\"1\"} 0");
	HAS(out,
	    "kepler_exporter_build_info{arch=\"amd64\",branch=\"\",os=\"linux\",revision=\"\",version=\"0.1.0\"} 1");
	/* nothing of the 0.10 profile */
	HASNOT(out, "kepler_node_cpu_");
	HASNOT(out, "kepler_build_info");
	HASNOT(out, "_cpu_joules_total");
	/* both profiles: each family once */
	struct render_filter both = {.profiles = 1u << EX_PROF_KEPLER | 1u << EX_PROF_KEPLER09,
				     .levels = EX_LEVELS_ALL};
	out = render_all(a, NULL, &both);
	HAS(out, "# TYPE kepler_node_cpu_joules_total counter");
	HAS(out, "# TYPE kepler_container_joules_total counter");
	/* the level filter applies to the 0.9 families too */
	struct render_filter node = {.profiles = 1u << EX_PROF_KEPLER09, .levels = 1u << EX_NODE};
	out = render_all(a, NULL, &node);
	HAS(out, "# TYPE kepler_node_package_joules_total counter");
	HASNOT(out, "kepler_process_");
	HASNOT(out, "kepler_container_");
	accum_destroy(&a);
}

/* A workload that did not run in the last slot shows 0 W; a terminated one says so. */
static void test_watts_of_idle_and_terminated(void)
{
	struct accum *a = fixture();
	struct wb_msg m = {.kind = WB_ESTIMATE};
	struct wb_estimate *e = &m.estimate;
	snprintf(e->env.host, sizeof e->env.host, "node-a");
	e->t0 = 104 * S;
	e->t1 = 105 * S;
	e->n_zones = 1;
	e->zones = wb_array_new(1, sizeof *e->zones);
	snprintf(e->zones[0].zone, 16, "package");
	snprintf(e->zones[0].name, 64, "package-0");
	snprintf(e->zones[0].path, 256, "/sys/class/powercap/intel-rapl:0");
	e->zones[0].energy_uj = 7000000;
	e->zones[0].idle_uj = 7000000;
	e->n_procs = 1;
	e->procs = wb_array_new(1, sizeof *e->procs);
	e->procs[0].pid = 43;
	e->procs[0].exited = true;
	snprintf(e->procs[0].comm, 16, "short");
	e->procs[0].n_energy_uj = 1;
	e->procs[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
	CHECK(accum_add(a, e, NULL) == 0);
	wb_msg_clear(&m);
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	char *out = render_all(a, NULL, &all);
	HAS(out,
	    "kepler_node_cpu_watts{node_name=\"node-a\",zone=\"package\",path=\"/sys/class/powercap/intel-rapl:0\"} 7.000000");
	HAS(out,
	    "kepler_process_cpu_watts{node_name=\"node-a\",pid=\"42\",comm=\"stress\",exe=\"\",type=\"container\",container_id=\"c1\",vm_id=\"\",state=\"running\",zone=\"package\"} 0.000000");
	HAS(out,
	    "kepler_process_cpu_joules_total{node_name=\"node-a\",pid=\"43\",comm=\"short\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"terminated\",zone=\"package\"} 0.000000");
	accum_destroy(&a);
}

static void test_filters(void)
{
	struct accum *a = fixture();
	struct wb_strlist allow = {
	    .n = 2, .v = (char *[]){"kepler_node_*", "kepler_process_cpu_joules_total"}};
	struct wb_strlist deny = {.n = 1, .v = (char *[]){"*_idle_*"}};
	struct render_filter f = {.levels = EX_LEVELS_ALL, .allow = &allow, .deny = &deny};
	char *out = render_all(a, NULL, &f);
	CHECK(strstr(out, "kepler_node_cpu_joules_total{") != NULL);
	CHECK(strstr(out, "kepler_process_cpu_joules_total{") != NULL);
	HASNOT(out, "kepler_node_cpu_idle_joules_total");
	HASNOT(out, "kepler_node_cpu_idle_watts");
	HASNOT(out, "kepler_process_cpu_watts");
	HASNOT(out, "kepler_container_");
	HASNOT(out, "kepler_build_info");

	/* levels: node and pod only */
	struct render_filter lv = {.levels = 1u << EX_NODE | 1u << EX_POD};
	out = render_all(a, NULL, &lv);
	CHECK(strstr(out, "kepler_pod_cpu_joules_total{") != NULL);
	CHECK(strstr(out, "kepler_node_cpu_watts{") != NULL);
	HASNOT(out, "kepler_process_");
	HASNOT(out, "kepler_vm_");
	CHECK(strstr(out, "kepler_build_info{") != NULL);

	unsigned levels;
	char err[128];
	struct wb_strlist names = {.n = 2, .v = (char *[]){"node", "vm"}};
	CHECK(levels_parse(&names, &levels, err, sizeof err) == 0);
	CHECK_U64(levels, 1u << EX_NODE | 1u << EX_VM);
	struct wb_strlist bad = {.n = 1, .v = (char *[]){"namespace"}};
	CHECK(levels_parse(&bad, &levels, err, sizeof err) == -1);
	CHECK(strstr(err, "namespace") != NULL);
	accum_destroy(&a);
}

static void test_stage_families(void)
{
	struct stages *st = stages_new(8);
	struct wb_msg m = {.kind = WB_STAT};
	struct wb_stat *s = &m.stat;
	snprintf(s->env.host, 64, "node-a");
	snprintf(s->env.src, 32, "estimd");
	snprintf(s->stage, 16, "estimd");
	snprintf(s->version, 32, "0.1.0");
	snprintf(s->mode, 32, "model");
	s->env.epoch = 7;
	s->frames_in = 100;
	s->frames_out = 90;
	s->lost = 3;
	s->rejected = 5;
	s->cpu_ns = 2500000000;
	s->rss_bytes = 4096;
	s->n_rejected_by = 1;
	struct wb_counter rej = {"type", 4};
	s->rejected_by = &rej;
	CHECK(stages_add(st, s, 190 * S, NULL) == 0);
	snprintf(s->env.src, 32, "powerd");
	snprintf(s->stage, 16, "powerd");
	s->n_rejected_by = 0;
	CHECK(stages_add(st, s, 150 * S, NULL) == 0);
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	struct accum_limits lim = {.levels = EX_LEVELS_ALL, .max_series = 10, .max_hosts = 1};
	struct accum *a = accum_new(&lim);
	struct exportd_counters ctr = {.http = {.requests = {0, 12, 0, 3, 0, 0},
						.connections = 57,
						.refused = 6,
						.request_timeouts = 5,
						.auth_failures = 4,
						.auth_throttled = 3}};
	struct rbuf b = {0};
	struct render_input in = {
	    .acc = a, .st = st, .ctr = &ctr, .now_ns = 200 * S, .stage_timeout_ns = 15 * S};
	render_metrics(&in, &all, &b);
	char *out = text(&b);
	HAS(out, "wattbus_stage_up{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 1");
	HAS(out, "wattbus_stage_up{host=\"node-a\",stage=\"powerd\",src=\"powerd\"} 0");
	HAS(out,
	    "wattbus_stage_last_message_age_seconds{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 10.000000000");
	HAS(out,
	    "wattbus_stage_info{host=\"node-a\",stage=\"estimd\",src=\"estimd\",version=\"0.1.0\",mode=\"model\"} 1");
	HAS(out,
	    "wattbus_stage_frames_in_total{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 100");
	HAS(out,
	    "wattbus_stage_messages_lost_total{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 3");
	HAS(out,
	    "wattbus_stage_messages_rejected_total{host=\"node-a\",stage=\"estimd\",src=\"estimd\",reason=\"type\"} 4");
	HAS(out,
	    "wattbus_stage_messages_rejected_total{host=\"node-a\",stage=\"estimd\",src=\"estimd\",reason=\"other\"} 1");
	HAS(out,
	    "wattbus_stage_cpu_seconds_total{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 2.500000000");
	HAS(out,
	    "wattbus_stage_resident_memory_bytes{host=\"node-a\",stage=\"estimd\",src=\"estimd\"} 4096");
	HAS(out, "wattbus_exportd_http_requests_total{code=\"2xx\"} 12");
	HAS(out, "wattbus_exportd_http_connections 57");
	HAS(out, "wattbus_exportd_http_connections_refused_total 6");
	HAS(out, "wattbus_exportd_http_request_timeouts_total 5");
	HAS(out, "wattbus_exportd_auth_failures_total 4");
	HAS(out, "wattbus_exportd_auth_throttled_total 3");
	HAS(out, "# TYPE wattbus_exportd_http_connections gauge");
	HAS(out, "wattbus_exportd_estimates_rejected_total{reason=\"stale\"} 0");
	HAS(out, "# TYPE wattbus_stage_frames_in_total counter");
	rbuf_free(&b);
	accum_destroy(&a);
	stages_destroy(&st);
}

/* Platform zones: Kepler's kepler_platform_watts with the BMC's labels from the zone path, and
 * the zone in the node metrics like any other. */
static void test_platform_watts(void)
{
	struct accum_limits lim = {.levels = EX_LEVELS_ALL,
				   .max_series = 1000,
				   .max_terminated = 10,
				   .terminated_ttl_ns = 600 * S,
				   .stale_after_ns = 300 * S,
				   .max_hosts = 4};
	struct accum *a = accum_new(&lim);
	const char *paths[3] = {
	    "https://10.0.0.5:443/redfish/v1/Chassis/System.Embedded.1/Power#/PowerControl/PowerControl",
	    "https://bmc-7/redfish/v1/Chassis/1U/EnvironmentMetrics#/PowerWatts",
	    "ipmi://bmc-9/dcmi"};
	for (int slot = 0; slot < 2; slot++) {
		struct wb_msg m = {.kind = WB_ESTIMATE};
		struct wb_estimate *e = &m.estimate;
		snprintf(e->env.host, sizeof e->env.host, "node-a");
		e->t0 = (100 + 2 * (uint64_t)slot) * S;
		e->t1 = e->t0 + 2 * S;
		e->n_zones = 3;
		e->zones = wb_array_new(3, sizeof *e->zones);
		for (int z = 0; z < 3; z++) {
			snprintf(e->zones[z].zone, 16, "platform");
			snprintf(e->zones[z].name, 64, "platform-%d", z);
			snprintf(e->zones[z].path, 256, "%s", paths[z]);
			e->zones[z].energy_uj = (uint64_t)(z + 1) * 500000000; /* 250, 500, 750 W */
			e->zones[z].idle_uj = e->zones[z].energy_uj;
		}
		/* a process that got none of the platform energy (estimd's default) */
		e->n_procs = 1;
		e->procs = wb_array_new(1, sizeof *e->procs);
		e->procs[0].pid = 7;
		snprintf(e->procs[0].comm, 16, "idle");
		e->procs[0].cpu_ns = 1000000;
		e->procs[0].n_energy_uj = 3;
		e->procs[0].energy_uj = wb_array_new(3, sizeof(uint64_t));
		CHECK(accum_add(a, e, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	char *out = render_all(a, NULL, &all);
	HAS(out, "# TYPE kepler_platform_watts gauge");
	HAS(out,
	    "kepler_platform_watts{source=\"redfish\",node_name=\"node-a\",bmc_id=\"10.0.0.5:443\",chassis_id=\"System.Embedded.1\",power_control_id=\"PowerControl\",power_control_name=\"\"} 250.000000");
	HAS(out,
	    "kepler_platform_watts{source=\"redfish\",node_name=\"node-a\",bmc_id=\"bmc-7\",chassis_id=\"1U\",power_control_id=\"\",power_control_name=\"\"} 500.000000");
	HAS(out,
	    "kepler_platform_watts{source=\"ipmi\",node_name=\"node-a\",bmc_id=\"bmc-9\",chassis_id=\"\",power_control_id=\"\",power_control_name=\"\"} 750.000000");
	/* no workload series of zeros for the platform kind; its CPU time is there */
	HASNOT(out, "kepler_process_cpu_joules_total{");
	HASNOT(out, "kepler_process_cpu_watts{");
	HAS(out,
	    "kepler_process_cpu_seconds_total{node_name=\"node-a\",pid=\"7\",comm=\"idle\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\"} 0.002000000");
	/* the node metrics sum the kind, as Kepler's AggregatedZone does */
	HAS(out,
	    "kepler_node_cpu_joules_total{node_name=\"node-a\",zone=\"platform\",path=\"aggregated-platform\"} 6000.000000");
	accum_destroy(&a);
	/* no platform zone, no family */
	a = fixture();
	out = render_all(a, NULL, &all);
	HASNOT(out, "kepler_platform_watts");
	accum_destroy(&a);
}

static const struct unit_case cases[] = {
    {"kepler_platform_watts from platform zones", test_platform_watts},
    {"fixed-point numbers are exact", test_numbers},
    {"label values are escaped and valid UTF-8", test_label_escaping},
    {"gzip round trip", test_gzip_round_trip},
    {"Kepler's families, values and label sets", test_kepler_families},
    {"GPU families and labels (Kepler), per GPU, apart from the cpu ones", test_gpu_families},
    {"Kepler 0.9's families from the same accumulators", test_kepler09_families},
    {"watts of idle and terminated workloads", test_watts_of_idle_and_terminated},
    {"metric allow/deny lists and levels", test_filters},
    {"wattbus_stage_* and wattbus_exportd_*", test_stage_families},
};

UNIT_MAIN(cases)
