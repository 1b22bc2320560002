/*
 * bench/usaged.sh's load: N live processes that each run once (0.3 ms of CPU,
 * more than usaged's 100 us fold step) and then sleep (pause) until the parent
 * is killed, so that they are in usaged's BPF map and in /proc, as long-running
 * idle processes on a real host are.
 *   usaged_sleepers N   (prints "ready" when all are forked; SIGTERM ends them all)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	stop = 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
	pid_t parent = getpid();
	signal(SIGTERM, on_term);
	for (long i = 0; i < n && !stop; i++) {
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			break;
		}
		if (p == 0) {
			/* Die with the parent, whatever kills it. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			struct timespec ts;
			do
				clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
			while (ts.tv_sec == 0 && ts.tv_nsec < 300000);
			for (;;)
				pause();
		}
	}
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		pause();
	return 0; /* the children get SIGKILL as the parent dies (PR_SET_PDEATHSIG) */
}
