/*
 * A stand-in BMC at libfreeipmi's boundary, preloaded into powerd
 * (LD_PRELOAD=build/tests/libipmi_standin.so): OpenIPMI's ipmi_sim answers DCMI
 * Get Power Reading with "invalid command", so there is no simulator to talk to.
 * The session and DCMI calls powerd makes are answered here; the response object
 * is filled with libfreeipmi's own fiid functions. Scripted through files in
 * $WB_IPMI_STANDIN:
 *   watts     the current_power to answer (whole watts)
 *   mode      ok | fail (the command fails) | hang (answer once mode changes) | inactive
 *             (power measurement not active) | slow:SECS
 *   password  the password the BMC accepts (default: calvin)
 * and appends "<wall ns> <watts>" to served, "<wall ns> open <host> <user>" to sessions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <freeipmi/freeipmi.h>

static char errmsg[128] = "success";

static void ctl(const char *name, char *buf, size_t size, const char *dflt)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s",
		 getenv("WB_IPMI_STANDIN") ? getenv("WB_IPMI_STANDIN") : ".", name);
	FILE *f = fopen(path, "r");
	snprintf(buf, size, "%s", dflt);
	if (!f)
		return;
	if (fgets(buf, (int)size, f))
		buf[strcspn(buf, "\r\n")] = '\0';
	fclose(f);
}

static void logline(const char *name, const char *fmt, const char *a, const char *b)
{
	char path[4096];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(path, sizeof(path), "%s/%s",
		 getenv("WB_IPMI_STANDIN") ? getenv("WB_IPMI_STANDIN") : ".", name);
	FILE *f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%lld ", (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
	fprintf(f, fmt, a, b);
	fputc('\n', f);
	fclose(f);
}

ipmi_ctx_t ipmi_ctx_create(void)
{
	return (ipmi_ctx_t)calloc(1, 64);
}

void ipmi_ctx_destroy(ipmi_ctx_t ctx)
{
	free(ctx);
}

int ipmi_ctx_close(ipmi_ctx_t ctx)
{
	return 0;
}

char *ipmi_ctx_errormsg(ipmi_ctx_t ctx)
{
	return errmsg;
}

static int open_session(const char *host, const char *user, const char *password)
{
	char want[128];
	ctl("password", want, sizeof(want), "calvin");
	logline("sessions", "open %s %s", host, user);
	if (strcmp(password ? password : "", want)) {
		snprintf(errmsg, sizeof(errmsg), "password invalid");
		return -1;
	}
	return 0;
}

int ipmi_ctx_open_outofband_2_0(ipmi_ctx_t ctx, const char *hostname, const char *username,
				const char *password, const unsigned char *k_g,
				unsigned int k_g_len, uint8_t privilege_level,
				uint8_t cipher_suite_id, unsigned int session_timeout,
				unsigned int retransmission_timeout, unsigned int workaround_flags,
				unsigned int flags)
{
	return open_session(hostname, username, password);
}

int ipmi_ctx_open_outofband(ipmi_ctx_t ctx, const char *hostname, const char *username,
			    const char *password, uint8_t authentication_type,
			    uint8_t privilege_level, unsigned int session_timeout,
			    unsigned int retransmission_timeout, unsigned int workaround_flags,
			    unsigned int flags)
{
	return open_session(hostname, username, password);
}

int ipmi_ctx_find_inband(ipmi_ctx_t ctx, ipmi_driver_type_t *driver_type, int disable_auto_probe,
			 uint16_t driver_address, uint8_t register_spacing,
			 const char *driver_device, unsigned int workaround_flags,
			 unsigned int flags)
{
	logline("sessions", "open %s %s", "inband", "-");
	*driver_type = IPMI_DEVICE_OPENIPMI;
	return 1;
}

int ipmi_cmd_dcmi_get_power_reading(ipmi_ctx_t ctx, uint8_t mode, uint8_t mode_attributes,
				    fiid_obj_t obj_cmd_rs)
{
	char m[64], w[64];
	ctl("mode", m, sizeof(m), "ok");
	if (!strncmp(m, "slow:", 5))
		usleep((useconds_t)(atof(m + 5) * 1e6));
	while (!strcmp(m, "hang")) {
		usleep(50000);
		ctl("mode", m, sizeof(m), "ok");
	}
	if (!strcmp(m, "fail")) {
		snprintf(errmsg, sizeof(errmsg), "session timeout");
		return -1;
	}
	ctl("watts", w, sizeof(w), "0");
	fiid_obj_clear(obj_cmd_rs);
	fiid_obj_set(obj_cmd_rs, "cmd", IPMI_CMD_DCMI_GET_POWER_READING);
	fiid_obj_set(obj_cmd_rs, "comp_code", 0);
	fiid_obj_set(obj_cmd_rs, "group_extension_identification", 0xDC);
	fiid_obj_set(obj_cmd_rs, "current_power", strtoull(w, NULL, 10));
	fiid_obj_set(obj_cmd_rs, "power_reading_state.power_measurement",
		     strcmp(m, "inactive") ? 1 : 0);
	logline("served", "%s%s", w, "");
	return 0;
}
