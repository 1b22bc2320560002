/*
 * A stand-in libnvidia-ml.so for powerd's nvml source: the NVML calls powerd makes, answered
 * from a script file the test rewrites while the daemon runs ($WB_FAKE_NVML, read at every call).
 * Lines:
 *   gpu uuid=GPU-x name=Fake energy_mj=N|- power_mw=N|- exclusive=0|1 mig=0|1 lost=0|1
 *       [since=UNIX_S [update_ms=N]]
 *   proc gpu=I pid=N sm=PCT|-
 * GPUs are numbered in file order; "-" answers NVML_ERROR_NOT_SUPPORTED (energy) or no
 * utilization sample (sm); lost=1 answers NVML_ERROR_GPU_IS_LOST to every reading. With since=,
 * the energy counter runs at power_mw from that wall-clock time on: energy_mj plus power_mw times
 * the seconds since (a driver's counter, which goes on across a powerd restart), advancing every
 * update_ms on the wall clock's grid (0: continuously).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#define MAX_GPUS 8
#define MAX_PROCS 64

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

struct gpu {
	char uuid[96], name[96];
	long long energy_mj, power_mw; /* -1: not supported */
	double since_s;		       /* > 0: energy_mj runs at power_mw from then */
	double update_s;	       /* > 0: ... in steps at multiples of this */
	int exclusive, mig, lost;
};

struct proc {
	int gpu;
	unsigned pid;
	int sm; /* -1: no sample */
};

static struct gpu gpus[MAX_GPUS];
static int ngpus;
static struct proc procs[MAX_PROCS];
static int nprocs;
static bool inited;

static long long num(const char *v)
{
	return strcmp(v, "-") ? atoll(v) : -1;
}

static int load(void)
{
	const char *path = getenv("WB_FAKE_NVML");
	FILE *f = path ? fopen(path, "r") : NULL;
	ngpus = nprocs = 0;
	if (!f)
		return -1;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
		if (!tok)
			continue;
		bool is_gpu = !strcmp(tok, "gpu");
		if (is_gpu && ngpus < MAX_GPUS) {
			struct gpu *g = &gpus[ngpus++];
			memset(g, 0, sizeof(*g));
			g->energy_mj = g->power_mw = -1;
			while ((tok = strtok_r(NULL, " \t\n", &save))) {
				char *eq = strchr(tok, '=');
				if (!eq)
					continue;
				*eq++ = '\0';
				if (!strcmp(tok, "uuid"))
					snprintf(g->uuid, sizeof(g->uuid), "%s", eq);
				else if (!strcmp(tok, "name"))
					snprintf(g->name, sizeof(g->name), "%s", eq);
				else if (!strcmp(tok, "energy_mj"))
					g->energy_mj = num(eq);
				else if (!strcmp(tok, "power_mw"))
					g->power_mw = num(eq);
				else if (!strcmp(tok, "exclusive"))
					g->exclusive = atoi(eq);
				else if (!strcmp(tok, "mig"))
					g->mig = atoi(eq);
				else if (!strcmp(tok, "lost"))
					g->lost = atoi(eq);
				else if (!strcmp(tok, "since"))
					g->since_s = atof(eq);
				else if (!strcmp(tok, "update_ms"))
					g->update_s = atof(eq) / 1000;
			}
		} else if (!strcmp(tok, "proc") && nprocs < MAX_PROCS) {
			struct proc *p = &procs[nprocs++];
			*p = (struct proc){.gpu = -1, .sm = -1};
			while ((tok = strtok_r(NULL, " \t\n", &save))) {
				char *eq = strchr(tok, '=');
				if (!eq)
					continue;
				*eq++ = '\0';
				if (!strcmp(tok, "gpu"))
					p->gpu = atoi(eq);
				else if (!strcmp(tok, "pid"))
					p->pid = (unsigned)atoi(eq);
				else if (!strcmp(tok, "sm"))
					p->sm = (int)num(eq);
			}
		}
	}
	fclose(f);
	return 0;
}

/* A device handle is its index + 1, so that none is NULL. */
static struct gpu *dev(nvmlDevice_t d, int *idx)
{
	long i = (long)(uintptr_t)d - 1;
	if (load() < 0 || i < 0 || i >= ngpus)
		return NULL;
	if (idx)
		*idx = (int)i;
	return &gpus[i];
}

nvmlReturn_t nvmlInit_v2(void)
{
	if (load() < 0)
		return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
	inited = true;
	return 0;
}

nvmlReturn_t nvmlShutdown(void)
{
	inited = false;
	return 0;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
	switch (rc) {
	case 0:
		return "Success";
	case 1:
		return "Uninitialized";
	case 2:
		return "Invalid Argument";
	case 3:
		return "Not Supported";
	case 7:
		return "Insufficient Size";
	case 9:
		return "Driver Not Loaded";
	case 15:
		return "GPU is lost";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inited)
		return 1;
	load();
	*count = (unsigned)ngpus;
	return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (!inited)
		return 1;
	if (load() < 0 || i >= (unsigned)ngpus)
		return 2;
	*d = (nvmlDevice_t)(uintptr_t)(i + 1);
	return 0;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	snprintf(buf, len, "%s", g->uuid);
	return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	snprintf(buf, len, "%s", g->name);
	return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	if (g->lost)
		return 15;
	if (g->energy_mj < 0)
		return 3;
	*mj = (unsigned long long)g->energy_mj;
	if (g->since_s > 0 && g->power_mw > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
		if (g->update_s > 0)
			now = (double)(long long)(now / g->update_s) * g->update_s;
		double dt = now - g->since_s;
		if (dt > 0)
			*mj += (unsigned long long)(dt * (double)g->power_mw); /* mW x s = mJ */
	}
	return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	if (g->lost)
		return 15;
	if (g->power_mw < 0)
		return 3;
	*mw = (unsigned)g->power_mw;
	return 0;
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int *mode)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	*mode = g->exclusive ? 3 : 0;
	return 0;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
	struct gpu *g = dev(d, NULL);
	if (!g)
		return 2;
	*cur = *pending = (unsigned)g->mig;
	return 0;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_t *infos)
{
	int idx;
	struct gpu *g = dev(d, &idx);
	if (!g)
		return 2;
	if (g->lost)
		return 15;
	unsigned n = 0;
	for (int i = 0; i < nprocs; i++)
		if (procs[i].gpu == idx)
			n++;
	if (n > *count) {
		*count = n;
		return 7;
	}
	n = 0;
	for (int i = 0; i < nprocs; i++)
		if (procs[i].gpu == idx)
			infos[n++] = (nvmlProcessInfo_t){.pid = procs[i].pid};
	*count = n;
	return 0;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
					     nvmlProcessUtilizationSample_t *samples,
					     unsigned int *count, unsigned long long last_seen)
{
	int idx;
	struct gpu *g = dev(d, &idx);
	if (!g)
		return 2;
	if (g->lost)
		return 15;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	unsigned long long now_us =
	    (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
	unsigned n = 0;
	for (int i = 0; i < nprocs; i++)
		if (procs[i].gpu == idx && procs[i].sm >= 0)
			n++;
	if (n == 0 || now_us <= last_seen)
		return 6; /* NVML_ERROR_NOT_FOUND */
	if (!samples || n > *count) {
		*count = n;
		return 7;
	}
	n = 0;
	for (int i = 0; i < nprocs; i++)
		if (procs[i].gpu == idx && procs[i].sm >= 0)
			samples[n++] =
			    (nvmlProcessUtilizationSample_t){.pid = procs[i].pid,
							     .timeStamp = now_us,
							     .smUtil = (unsigned)procs[i].sm};
	*count = n;
	return 0;
}
