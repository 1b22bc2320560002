/*
 * What the BMC sources (redfish, ipmi) share: the credentials file's checks and
 * the held reading that goes stale. The sources themselves run against stand-ins
 * in tests/bats/powerd_redfish.bats and powerd_ipmi.bats.
 */
#include "test_powerd_fake.h"
#include "clock.h"
#include "unit.h"

static int creds(const char *text, mode_t mode, char *user, char *pass, char *err, size_t errlen)
{
	fake_write("cred", "%s", text);
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/cred", fake_root);
	chmod(path, mode);
	return pd_read_credentials("redfish_credentials", path, user, 64, pass, 64, err, errlen);
}

static void test_credentials(void)
{
	char user[64], pass[64], err[512];
	fake_new();
	CHECK(creds("root:calvin\n", 0600, user, pass, err, sizeof(err)) == 0);
	CHECK_STR(user, "root");
	CHECK_STR(pass, "calvin");
	/* the password may hold colons; only the first one splits */
	CHECK(creds("admin:a:b:c", 0400, user, pass, err, sizeof(err)) == 0);
	CHECK_STR(user, "admin");
	CHECK_STR(pass, "a:b:c");
	/* any group or other bit refuses it, naming the key, the file and its mode */
	CHECK(creds("root:calvin\n", 0640, user, pass, err, sizeof(err)) < 0);
	CHECK(strstr(err, "redfish_credentials ") == err);
	CHECK(strstr(err, "/cred: mode 0640 lets group or others at the BMC's password; refused") !=
	      NULL);
	CHECK(strstr(err, "calvin") == NULL);
	CHECK(creds("root:calvin\n", 0604, user, pass, err, sizeof(err)) < 0);
	CHECK(creds("no colon here\n", 0600, user, pass, err, sizeof(err)) < 0);
	CHECK(strstr(err, "expected one line USER:PASSWORD") != NULL);
	CHECK(creds(":nouser\n", 0600, user, pass, err, sizeof(err)) < 0);
	char path[PD_PATH_MAX];
	snprintf(path, sizeof(path), "%s/missing", fake_root);
	CHECK(pd_read_credentials("ipmi_credentials", path, user, 64, pass, 64, err, sizeof(err)) <
	      0);
	CHECK(strstr(err, "ipmi_credentials ") == err && strstr(err, "cannot open") != NULL);
	/* a directory is not a credentials file */
	fake_mkdirs(path);
	CHECK(pd_read_credentials("ipmi_credentials", path, user, 64, pass, 64, err, sizeof(err)) <
	      0);
	fake_cleanup();
}

static void test_held_reading(void)
{
	struct pd_zone z;
	pd_zone_init(&z, &redfish_source, "platform", 0);
	snprintf(z.path, sizeof(z.path), "https://bmc/redfish/v1/Chassis/1U/Power#/PowerControl/0");
	z.hold_ns = 60 * 1000000000ull;
	uint64_t v = 0;
	char err[512];
	/* nothing yet: skipped, not an error */
	CHECK(pd_zone_read_held(&z, &v, err, sizeof(err)) == PD_READ_NONE);
	CHECK(strstr(err, "no reading yet") != NULL);
	z.held_uw = 344000000;
	z.held_mono_ns = wb_mono_ns();
	CHECK(pd_zone_read_held(&z, &v, err, sizeof(err)) == PD_READ_OK);
	CHECK_U64(v, 344000000);
	/* older than hold_ns: no longer used */
	z.held_mono_ns = wb_mono_ns() - 61 * 1000000000ull;
	CHECK(pd_zone_read_held(&z, &v, err, sizeof(err)) == PD_READ_NONE);
	CHECK(strstr(err, "old, more than 60.0 s") != NULL);
}

static void test_platform_names(void)
{
	struct pd_zone z;
	pd_zone_init(&z, &ipmi_source, "platform", 0);
	pd_zone_name(&z, "platform", 0);
	CHECK_STR(z.name, "platform");
	pd_zone_name(&z, "platform", 2);
	CHECK_STR(z.name, "platform-2");
	pd_zone_name(&z, "psys", 0);
	CHECK_STR(z.name, "psys");
	pd_zone_name(&z, "package", 0);
	CHECK_STR(z.name, "package-0");
}

static const struct unit_case cases[] = {
    {"credentials file: USER:PASSWORD, refused unless mode 600 or stricter", test_credentials},
    {"held reading: none, fresh, stale", test_held_reading},
    {"platform zone names as hwmon's", test_platform_names},
};

UNIT_MAIN(cases)
