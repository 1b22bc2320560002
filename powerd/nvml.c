/*
 * NVIDIA GPUs through NVML, loaded at run time (dlopen), so that one binary runs with or without
 * the driver. One zone per GPU: the driver's energy counter (mJ, Volta and later) where it has
 * one, else its power readings integrated; and per sample, the GPU's compute processes with their
 * SM time, for estimd to share the GPU's energy by.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "dl.h"
#include "powerd.h"

/* The few NVML declarations used, as NVIDIA's API reference documents them (nvml.h). */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_GPU_IS_LOST = 15,
};
enum { NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3, NVML_DEVICE_MIG_ENABLE = 1 };
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t; /* nvmlProcessInfo_v2_t, what the _v3 call fills */

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp; /* us */
	unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

struct nvml_api {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
	/* optional: a driver without them gives no per-process weights */
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
	nvmlReturn_t (*util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
			     unsigned long long);
	nvmlReturn_t (*mig)(nvmlDevice_t, unsigned int *, unsigned int *);
	nvmlReturn_t (*compute_mode)(nvmlDevice_t, int *);
};

#define NVML_PROCS_MAX 1024 /* schemas/power.json: gpu_procs maxItems */

struct nvml_gpu {
	nvmlDevice_t dev;
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	char model[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	bool mig, exclusive, listed;	 /* listed: this sample's process list was read */
	unsigned long long last_seen_us; /* newest utilization sample taken */
	struct wb_gpu_proc *procs;
	size_t nprocs;
};

/*
 * The library is process-wide (nvmlInit counts references), so its state is too: a zone's read
 * gets only the zone, whose index names the GPU here.
 */
static struct {
	void *lib;
	struct nvml_api api;
	struct nvml_gpu *gpus;
	unsigned ngpus;
	nvmlProcessInfo_t *pinfo;
	nvmlProcessUtilizationSample_t *samples;
	unsigned nsamples_cap;
} nv;

static const char *nvml_err(nvmlReturn_t rc)
{
	const char *s = nv.api.error_string ? nv.api.error_string(rc) : NULL;
	return s ? s : "unknown NVML error";
}

static void nvml_close(void)
{
	if (!nv.lib)
		return;
	if (nv.api.shutdown)
		nv.api.shutdown();
	for (unsigned i = 0; i < nv.ngpus; i++)
		free(nv.gpus[i].procs);
	free(nv.gpus);
	free(nv.pinfo);
	free(nv.samples);
	dlclose(nv.lib);
	memset(&nv, 0, sizeof(nv));
}

static void nvml_destroy(struct pd_set *set)
{
	(void)set;
	nvml_close();
}

static int nvml_load(const char *path, char *why, size_t whylen)
{
	struct nvml_api *a = &nv.api;
	/* Without the optional ones a GPU gives energy but no process weights. */
	const struct wb_dl_sym syms[] = {
	    {&a->init, "nvmlInit_v2", true},
	    {&a->shutdown, "nvmlShutdown", true},
	    {&a->error_string, "nvmlErrorString", true},
	    {&a->count, "nvmlDeviceGetCount_v2", true},
	    {&a->handle, "nvmlDeviceGetHandleByIndex_v2", true},
	    {&a->uuid, "nvmlDeviceGetUUID", true},
	    {&a->name, "nvmlDeviceGetName", true},
	    {&a->energy, "nvmlDeviceGetTotalEnergyConsumption", true},
	    {&a->power, "nvmlDeviceGetPowerUsage", true},
	    {&a->procs, "nvmlDeviceGetComputeRunningProcesses_v3", false},
	    {&a->util, "nvmlDeviceGetProcessUtilization", false},
	    {&a->mig, "nvmlDeviceGetMigMode", false},
	    {&a->compute_mode, "nvmlDeviceGetComputeMode", false},
	};
	char e[512];
	nv.lib = wb_dl_open(path, syms, sizeof(syms) / sizeof(syms[0]), e, sizeof(e));
	if (!nv.lib) {
		snprintf(why, whylen, "%s: %s", e,
			 strncmp(e, "cannot load", 11)
			     ? "an NVML older than driver 418?"
			     : "no NVIDIA driver on this host, or set nvml_library to its path");
		return -1;
	}
	if (!a->procs || !a->util)
		log_warnx(
		    "nvml: %s lacks nvmlDeviceGetComputeRunningProcesses_v3 or nvmlDeviceGetProcessUtilization: GPU energy is measured but not shared among processes",
		    path);
	return 0;
}

/* Its keys in [powerd]. */
struct nvml_conf {
	char *nvml_library; /* "": libnvidia-ml.so.1 from the loader's path */
};

static int nvml_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	nvml_close();
	const struct nvml_conf *conf = pd_source_conf(opts, &nvml_source);
	const char *path =
	    conf->nvml_library && conf->nvml_library[0] ? conf->nvml_library : "libnvidia-ml.so.1";
	if (nvml_load(path, why, whylen) < 0) {
		nvml_close();
		return 0;
	}
	nvmlReturn_t rc = nv.api.init();
	if (rc != NVML_SUCCESS) {
		snprintf(why, whylen,
			 "nvmlInit_v2 failed: %s (is the nvidia kernel module loaded?)",
			 nvml_err(rc));
		nv.api.shutdown = NULL; /* not initialised: nothing to shut down */
		nvml_close();
		return 0;
	}
	unsigned count = 0;
	rc = nv.api.count(&count);
	if (rc != NVML_SUCCESS || count == 0) {
		if (rc != NVML_SUCCESS)
			snprintf(why, whylen, "nvmlDeviceGetCount_v2 failed: %s", nvml_err(rc));
		else
			snprintf(why, whylen, "NVML sees no GPU on this host");
		nvml_close();
		return 0;
	}
	nv.gpus = calloc(count, sizeof(*nv.gpus));
	if (!nv.gpus) {
		snprintf(why, whylen, "out of memory for %u GPUs", count);
		nvml_close();
		return 0;
	}
	nv.ngpus = count;
	uint64_t max_uw = (uint64_t)(opts->max_power_w * 1e6);
	uint64_t max_gap_ns = integ_bridge_ns(opts->interval_ns);
	int added = 0;
	char first_err[256] = "";
	for (unsigned i = 0; i < count; i++) {
		struct nvml_gpu *g = &nv.gpus[i];
		rc = nv.api.handle(i, &g->dev);
		if (rc == NVML_SUCCESS)
			rc = nv.api.uuid(g->dev, g->uuid, sizeof(g->uuid));
		if (rc != NVML_SUCCESS) {
			if (!first_err[0])
				snprintf(first_err, sizeof(first_err), "GPU %u: %s", i,
					 nvml_err(rc));
			log_warnx("nvml: GPU %u: %s; left out", i, nvml_err(rc));
			g->dev = NULL;
			continue;
		}
		if (nv.api.name(g->dev, g->model, sizeof(g->model)) != NVML_SUCCESS)
			g->model[0] = '\0';
		unsigned cur = 0, pending = 0;
		g->mig = nv.api.mig && nv.api.mig(g->dev, &cur, &pending) == NVML_SUCCESS &&
			 cur == NVML_DEVICE_MIG_ENABLE;
		int mode = 0;
		g->exclusive = nv.api.compute_mode &&
			       nv.api.compute_mode(g->dev, &mode) == NVML_SUCCESS &&
			       mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
		struct pd_zone z;
		pd_zone_init(&z, &nvml_source, "gpu", i);
		snprintf(z.name, sizeof(z.name), "gpu-%u", i);
		pd_fmt(z.path, sizeof(z.path), "nvml:%s", g->uuid);
		unsigned long long mj;
		rc = nv.api.energy(g->dev, &mj);
		const char *how;
		if (rc == NVML_SUCCESS) {
			counter_init(&z.ctr, 0, 1000, 1, max_uw); /* mJ since the driver loaded */
			how = "energy counter";
		} else {
			unsigned mw;
			nvmlReturn_t prc = nv.api.power(g->dev, &mw);
			if (prc != NVML_SUCCESS) {
				if (!first_err[0])
					snprintf(first_err, sizeof(first_err),
						 "GPU %u: no energy (%s) nor power (%s)", i,
						 nvml_err(rc), nvml_err(prc));
				log_warnx(
				    "nvml: GPU %u (%s): no energy counter (%s) nor power reading (%s); left out",
				    i, g->uuid, nvml_err(rc), nvml_err(prc));
				g->dev = NULL;
				continue;
			}
			z.is_power = true;
			integ_init(&z.integ, max_uw, max_gap_ns);
			how = "power integrated";
		}
		log_info("nvml: %s: GPU %u %s (%s)%s%s, %s", z.name, i, g->uuid, g->model,
			 g->mig ? ", MIG enabled" : "", g->exclusive ? ", exclusive-process" : "",
			 how);
		if (pd_set_add(set, &z) >= 0)
			added++;
	}
	if (added == 0) {
		snprintf(why, whylen, "no GPU gave energy or power: %s", first_err);
		nvml_close();
	}
	return added;
}

static enum pd_read_err nvml_read(struct pd_zone *z, uint64_t *value, char *err, size_t errlen)
{
	if (z->index >= nv.ngpus || !nv.gpus[z->index].dev) {
		errno = ENODEV;
		snprintf(err, errlen, "nvml: GPU %u is not open", z->index);
		return PD_READ_IO;
	}
	struct nvml_gpu *g = &nv.gpus[z->index];
	nvmlReturn_t rc;
	if (z->is_power) {
		unsigned mw = 0;
		rc = nv.api.power(g->dev, &mw);
		*value = (uint64_t)mw * 1000;
	} else {
		unsigned long long mj = 0;
		rc = nv.api.energy(g->dev, &mj);
		*value = mj;
	}
	if (rc == NVML_SUCCESS)
		return PD_READ_OK;
	errno = rc == NVML_ERROR_NO_PERMISSION ? EACCES : ENODEV;
	snprintf(err, errlen, "nvml: GPU %u (%s): %s: %s", z->index, g->uuid,
		 z->is_power ? "nvmlDeviceGetPowerUsage" : "nvmlDeviceGetTotalEnergyConsumption",
		 nvml_err(rc));
	return PD_READ_IO;
}

static int grow_samples(unsigned n)
{
	if (n <= nv.nsamples_cap)
		return 0;
	void *s = realloc(nv.samples, n * sizeof(*nv.samples));
	if (!s)
		return -1;
	nv.samples = s;
	void *p = realloc(nv.pinfo, n * sizeof(*nv.pinfo));
	if (!p)
		return -1;
	nv.pinfo = p;
	nv.nsamples_cap = n;
	return 0;
}

static struct wb_gpu_proc *proc_slot(struct nvml_gpu *g, unsigned pid)
{
	for (size_t i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	if (g->nprocs >= NVML_PROCS_MAX)
		return NULL;
	struct wb_gpu_proc *p = &g->procs[g->nprocs++];
	*p = (struct wb_gpu_proc){.pid = pid};
	return p;
}

/*
 * The compute processes of one GPU and their SM time in the interval that ends now: the mean of
 * their utilization samples since the last sample taken, times the interval. A process with no
 * sample is listed with 0, so that estimd can still share by count.
 */
static void gpu_list(struct nvml_gpu *g, uint64_t interval_ns)
{
	g->listed = false;
	g->nprocs = 0;
	if (!g->dev || !nv.api.procs)
		return;
	if (!g->procs && !(g->procs = calloc(NVML_PROCS_MAX, sizeof(*g->procs))))
		return;
	unsigned n = nv.nsamples_cap;
	nvmlReturn_t rc = nv.api.procs(g->dev, &n, nv.pinfo);
	if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
		if (grow_samples(n + 16) < 0)
			return;
		n = nv.nsamples_cap;
		rc = nv.api.procs(g->dev, &n, nv.pinfo);
	}
	if (rc != NVML_SUCCESS)
		return;
	for (unsigned i = 0; i < n; i++)
		proc_slot(g, nv.pinfo[i].pid);
	g->listed = true;
	if (!nv.api.util)
		return;
	n = nv.nsamples_cap;
	rc = nv.api.util(g->dev, nv.samples, &n, g->last_seen_us);
	if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
		if (grow_samples(n + 16) < 0)
			return;
		n = nv.nsamples_cap;
		rc = nv.api.util(g->dev, nv.samples, &n, g->last_seen_us);
	}
	if (rc != NVML_SUCCESS) /* NOT_FOUND: no sample since last_seen_us */
		return;
	/* mean SM% per process: sum in sm_ns, count in a parallel pass */
	for (size_t i = 0; i < g->nprocs; i++) {
		unsigned long long sum = 0, cnt = 0;
		for (unsigned j = 0; j < n; j++) {
			if (nv.samples[j].pid != g->procs[i].pid)
				continue;
			sum += nv.samples[j].smUtil > 100 ? 100 : nv.samples[j].smUtil;
			cnt++;
		}
		if (cnt)
			g->procs[i].sm_ns =
			    (uint64_t)((unsigned __int128)interval_ns * sum / (cnt * 100));
	}
	for (unsigned j = 0; j < n; j++)
		if (nv.samples[j].timeStamp > g->last_seen_us)
			g->last_seen_us = nv.samples[j].timeStamp;
}

static void nvml_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns)
{
	(void)t_ns, (void)mono_ns;
	if (!nv.pinfo && grow_samples(64) < 0)
		return;
	/* the interval in force: a SIGHUP may have changed it */
	for (unsigned i = 0; i < nv.ngpus; i++)
		gpu_list(&nv.gpus[i], set->opts->interval_ns);
}

static void nvml_annotate(const struct pd_zone *z, struct wb_power_zone *pz)
{
	if (z->index >= nv.ngpus)
		return;
	const struct nvml_gpu *g = &nv.gpus[z->index];
	snprintf(pz->uuid, sizeof(pz->uuid), "%s", g->uuid);
	snprintf(pz->model, sizeof(pz->model), "%s", g->model);
	snprintf(pz->vendor, sizeof(pz->vendor), "nvidia");
	pz->mig = g->mig;
	pz->exclusive = g->exclusive;
	if (!g->listed || !g->nprocs)
		return;
	pz->gpu_procs = wb_array_new(g->nprocs, sizeof(*pz->gpu_procs));
	if (!pz->gpu_procs)
		return;
	memcpy(pz->gpu_procs, g->procs, g->nprocs * sizeof(*g->procs));
	pz->n_gpu_procs = g->nprocs;
}

static const char *nvml_permission_hint(void)
{
	return "NVML refused the reading; run powerd as a user allowed to query the GPU";
}

#define OFF(f) offsetof(struct nvml_conf, f)
static const struct wb_conf_key nvml_keys[] = {
    {"nvml_library", WB_CONF_STR | WB_CONF_RESTART, OFF(nvml_library), "libnvidia-ml.so.1", 0, 0,
     NULL, "the NVML library the nvml source loads (a name the loader searches, or a path)"},
};
#undef OFF

const struct pd_source nvml_source = {
    .name = "nvml",
    .in_auto = false,
    .keys = nvml_keys,
    .nkeys = sizeof(nvml_keys) / sizeof(nvml_keys[0]),
    .conf_size = sizeof(struct nvml_conf),
    .power_from = "from NVML power readings",
    .discover = nvml_discover,
    .read = nvml_read,
    .sample = nvml_sample,
    .annotate = nvml_annotate,
    .destroy = nvml_destroy,
    .permission_hint = nvml_permission_hint,
};
