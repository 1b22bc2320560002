/*
 * wattbus keygen: make a CURVE certificate pair for the bus, in czmq's zcert
 * format: NAME (public part, safe to copy to peers) and NAME_secret (keep it
 * on the host, mode 0600).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <czmq.h>

#include "cli.h"

static const struct cli_flag keygen_flags[] = {
    CLI_OPERAND("NAME", "writes NAME (public certificate) and NAME_secret (secret, mode 0600)"),
};
static const struct cli_verb keygen_verb = {.name = "keygen",
					    .flags = keygen_flags,
					    .nflags = 1,
					    .min_args = 1,
					    .max_args = 1,
					    .synopsis = "NAME"};

int cmd_keygen(int argc, char **argv)
{
	int first, rc = cli_parse(&keygen_verb, argc, argv, NULL, &first);
	if (rc >= 0)
		return rc;
	const char *name = argv[first];
	char secret[4096];
	snprintf(secret, sizeof(secret), "%s_secret", name);
	if (access(name, F_OK) == 0 || access(secret, F_OK) == 0) {
		fprintf(stderr, "wattbus keygen: %s or %s exists; not overwriting it\n", name,
			secret);
		return 1;
	}
	zcert_t *cert = zcert_new();
	if (!cert) {
		fprintf(stderr, "wattbus keygen: cannot make a key pair (libzmq without CURVE?)\n");
		return 1;
	}
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	zcert_set_meta(cert, "host", "%s", host);
	mode_t old = umask(077);
	rc = zcert_save(cert, name);
	umask(old);
	if (rc == 0)
		chmod(name, 0644);
	if (rc != 0) {
		fprintf(stderr, "wattbus keygen: cannot write %s: %s\n", name, strerror(errno));
		zcert_destroy(&cert);
		return 1;
	}
	printf("%s (public key %s)\n%s (secret: keep it on this host)\n", name,
	       zcert_public_txt(cert), secret);
	zcert_destroy(&cert);
	return 0;
}
