/*
 * Loads the programs of a BPF object (bench/switch_floor.bpf.c), attaches
 * them, prints "attached PROG_ID" for each and holds them until SIGTERM or
 * SIGINT. bench/usaged.sh builds it (cc ... -lbpf); not part of wattbus.
 *   switch_floor OBJ
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	sigset_t mask;
	int sig;

	if (argc != 2) {
		fprintf(stderr, "usage: switch_floor OBJ\n");
		return 2;
	}
	/* A shell starts a background job with SIGINT ignored, and an ignored signal never
	 * reaches a blocked set: take the defaults back first, as lib/daemon.c does. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "switch_floor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj)
	{
		struct bpf_prog_info info = {0};
		__u32 len = sizeof(info);
		if (!bpf_program__attach(p) ||
		    bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len)) {
			fprintf(stderr, "switch_floor: %s: %s\n", bpf_program__name(p),
				strerror(errno));
			return 1;
		}
		printf("attached %u\n", info.id);
	}
	fflush(stdout);
	sigwait(&mask, &sig);
	bpf_object__close(obj);
	return 0;
}
