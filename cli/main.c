/*
 * wattbus: the user's tool for the bus. Subcommands tap, record, replay and pub
 * let a shell pipeline watch, save, replay or stand in for any stage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <czmq.h>

#include "cli.h"
#include "clock.h"
#include "config.h"
#include "daemon.h"
#include "log.h"

static const char *argv0 = "wattbus";

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
    {"tap", cmd_tap,
     "ENDPOINT [PREFIX...]   print every message as one JSON line (--check validates)"},
    {"record", cmd_record, "ENDPOINT FILE [PREFIX...]   store messages with their receive times"},
    {"replay", cmd_replay, "FILE ENDPOINT   publish recorded messages again with their spacing"},
    {"pub", cmd_pub, "ENDPOINT   publish JSON lines from stdin as msgpack messages"},
    {"keygen", cmd_keygen,
     "NAME   make a CURVE certificate pair (NAME, NAME_secret) for tcp:// endpoints"},
    {"doctor", cmd_doctor,
     "   what this machine offers (RAPL, MSR, hwmon, BPF, perf, cgroups) and each stage's mode"},
    {"probe", cmd_probe,
     "[--exec CMD | --sub ENDPOINT]   each meter's update period, step, noise, wrap and cost; alignd settings"},
    {"compare", cmd_compare,
     "A B --from FILE | --sub ENDPOINT   one meter against another: lag, gain, offset, R^2, MAE"},
    {"vmpub", cmd_vmpub,
     "VM ENDPOINT   publish one VM's measured energy from estimd for its guest (powerd's bus source)"},
    {"train", cmd_train,
     "[--out DIR | --publish EP] RECORDING...   fit a power model from recordings of a metered host's aligned slots"},
    {"top", cmd_top,
     "[ENDPOINT]   live watts per zone, process, container and pod from estimd (--plain for scripts)"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: wattbus COMMAND [OPTIONS] ARGS\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n`wattbus COMMAND --help` for a command's options; see wattbus(1).\n");
}

struct wb_sub *cli_sub_open(const char *endpoints, const char *const *prefixes, size_t n,
			    const struct wb_sockopts *so)
{
	struct wb_sub *sub = wb_sub_new(so);
	if (!sub || wb_sub_connect(sub, endpoints) < 0) {
		wb_sub_destroy(&sub);
		return NULL;
	}
	int rc = n ? 0 : wb_sub_subscribe(sub, "");
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = wb_sub_subscribe(sub, prefixes[i]);
	if (rc < 0)
		wb_sub_destroy(&sub);
	return sub;
}

/* What is at an ipc path: something listening, nothing, or a socket file left by a stopped process.
 */
enum ipc_state cli_ipc_state(const char *path)
{
	struct stat st;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? IPC_NONE
							   : IPC_LISTENING; /* not ours to tell */
	if (!S_ISSOCK(st.st_mode))
		return IPC_NONE;
	if (strlen(path) >= sizeof(sa.sun_path))
		return IPC_LISTENING; /* ZeroMQ cannot use it either; let it say so */
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return IPC_LISTENING;
	bool refused = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED;
	close(fd);
	return refused ? IPC_STALE : IPC_LISTENING;
}

bool cli_ipc_missing(const char *endpoints, char *path, size_t size)
{
	for (const char *p = endpoints; *p;) {
		size_t n = strcspn(p, ",");
		const char *ep = p;
		size_t len = n;
		if (len && *ep == '>') {
			ep++;
			len--;
		}
		/* ipc://@name is Linux's abstract namespace: no file to look for. */
		if (len > 6 && !strncmp(ep, "ipc://", 6) && ep[6] != '@') {
			snprintf(path, size, "%.*s", (int)(len - 6), ep + 6);
			if (cli_ipc_state(path) != IPC_LISTENING)
				return true;
		}
		p += n + (p[n] == ',');
	}
	return false;
}

void cli_say_missing(const char *cmd, const char *path, uint64_t waited_ns)
{
	const char *what = cli_ipc_state(path) == IPC_STALE
			       ? "a socket left by a stopped process, nothing listens there"
			       : "no such socket";
	/* The note while waiting is for a person; a script reading stderr gets only the failure. */
	if (!waited_ns && isatty(STDERR_FILENO))
		fprintf(stderr, "wattbus %s: %s: %s yet; waiting for a stage to publish there\n",
			cmd, path, what);
	else if (waited_ns)
		fprintf(
		    stderr,
		    "wattbus %s: %s: %s after %.1f s: is the stage running, with its sockets there? (installed stages use /run/wattbus, make run uses build/run)\n",
		    cmd, path, what, (double)waited_ns / 1e9);
}

size_t cli_runtime_dirs(char (*dirs)[PATH_MAX], size_t max)
{
	size_t n = 0;
	const char *env = getenv("WATTBUS_RUNTIME_DIR");
	if (max < 2)
		return 0;
	if (!env || !env[0]) {
		/* make run keeps the sockets in run/ beside the programs it starts. */
		char exe[PATH_MAX] = "";
		if (strchr(argv0, '/')) {
			snprintf(exe, sizeof(exe), "%s", argv0);
		} else {
			ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
			exe[len > 0 ? len : 0] = '\0';
		}
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(dirs[n++], PATH_MAX, "%.*s/run", PATH_MAX - 5, exe);
		}
	}
	wb_default_runtime_dir(dirs[n++], PATH_MAX);
	return n;
}

int cli_find_socket(const char *file, char *ep, size_t size, char *looked, size_t looked_size)
{
	char dirs[2][PATH_MAX], path[2 * PATH_MAX];
	size_t n = cli_runtime_dirs(dirs, 2);
	looked[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(path, sizeof(path), "%s/%s", dirs[i], file);
		if (len > 0 && (size_t)len < sizeof(path) && cli_ipc_state(path) == IPC_LISTENING) {
			snprintf(ep, size, "ipc://%s", path);
			return 0;
		}
		size_t used = strlen(looked);
		snprintf(looked + used, looked_size - used, "%s%s", i ? " and " : "", path);
	}
	return -1;
}

bool cli_interrupted(void)
{
	return zsys_interrupted != 0;
}

int main(int argc, char **argv)
{
	log_init("wattbus", WB_LOG_INFO);
	argv0 = argv[0];
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version") ||
	    !strcmp(argv[1], "version")) {
		printf("wattbus %s\n", WB_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			char prog[32];
			snprintf(prog, sizeof(prog), "wattbus %s", commands[i].name);
			log_init(strdup(prog), WB_LOG_INFO);
			zsys_set_logstream(stderr);
			return commands[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "wattbus: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
