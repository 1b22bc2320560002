/*
 * The bus alone: one stand-in for a stage that carries the stage's messages
 * over czmq and libzmq as the stage does (a PUB socket bound, SUB sockets
 * connected, zloop), but does no work of its own: no decoding, no state, no
 * files. Five of them wired like the pipeline (bench/pipeline.sh floor) cost
 * what the bus costs on this machine, the floor under the pipeline's CPU and
 * PSS: the wake-ups of each process and of libzmq's I/O thread per message,
 * and the pages of the libraries that the bus brings.
 *
 *   bus_floor --pub EP --topic T --size N [--every MS | --on PREFIX] [--per K]
 *             [--sub EP]... [--subscribe PREFIX]... [--stat-every K]
 *
 * --every MS: send a message of N bytes on topic T every MS ms (powerd,
 * usaged); --on PREFIX: send one for each message received whose topic starts
 * with PREFIX (alignd, estimd); --per K: only at every K-th of those (exportd,
 * whose only message is its stat). Every K-th message sent is followed by a
 * stat message (topic "stat/floor", 1 KiB) with --stat-every K, as a stage's
 * stat messages ride on its slot's messages. Runs until SIGTERM or SIGINT,
 * read from a signalfd in the loop as the stages read theirs (blocked before
 * libzmq starts its threads, so that no other thread takes it).
 * Built by bench/pipeline.sh (cc ... -lczmq -lzmq); not part of wattbus.
 */
#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>

#define MAX_SUBS 8

static const char *topic, *on_prefix;
static size_t size;
static int stat_every, per = 1;
static long sent, triggers;
static char *body, stat_body[1024];

static void send_one(zsock_t *pub)
{
	if (++triggers % per)
		return;
	zsock_send(pub, "sb", topic, body, size);
	if (stat_every && ++sent % stat_every == 0)
		zsock_send(pub, "sb", "stat/floor", stat_body, sizeof(stat_body));
}

static int on_timer(zloop_t *loop, int id, void *arg)
{
	(void)loop, (void)id;
	send_one(arg);
	return 0;
}

static int on_sub(zloop_t *loop, zsock_t *sub, void *arg)
{
	char *t = NULL;
	zframe_t *f = NULL;
	(void)loop;
	if (zsock_recv(sub, "sf", &t, &f) != 0)
		return 0;
	if (on_prefix && t && strncmp(t, on_prefix, strlen(on_prefix)) == 0)
		send_one(arg);
	zstr_free(&t);
	zframe_destroy(&f);
	return 0;
}

/* SIGTERM or SIGINT: end the loop. */
static int on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	(void)loop, (void)item, (void)arg;
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: bus_floor --pub EP --topic T --size N [--every MS | --on PREFIX] "
			"[--per K] [--sub EP]... [--subscribe PREFIX]... [--stat-every K]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *pub_ep = NULL, *subs[MAX_SUBS], *prefixes[MAX_SUBS];
	int nsubs = 0, nprefixes = 0, every_ms = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--pub"))
			pub_ep = v;
		else if (!strcmp(k, "--topic"))
			topic = v;
		else if (!strcmp(k, "--size"))
			size = strtoul(v, NULL, 10);
		else if (!strcmp(k, "--every"))
			every_ms = atoi(v);
		else if (!strcmp(k, "--on"))
			on_prefix = v;
		else if (!strcmp(k, "--per"))
			per = atoi(v) > 0 ? atoi(v) : 1;
		else if (!strcmp(k, "--stat-every"))
			stat_every = atoi(v);
		else if (!strcmp(k, "--sub") && nsubs < MAX_SUBS)
			subs[nsubs++] = v;
		else if (!strcmp(k, "--subscribe") && nprefixes < MAX_SUBS)
			prefixes[nprefixes++] = v;
		else
			usage();
	}
	if (argc % 2 == 0 || !pub_ep || !topic || !size)
		usage();
	sigset_t mask;
	/* A shell starts a background job with SIGINT ignored, and an ignored signal never
	 * reaches a blocked set: take the defaults back first, as lib/daemon.c does. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	zsys_handler_set(NULL);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	body = calloc(1, size);
	zsock_t *pub = zsock_new_pub(pub_ep);
	zloop_t *loop = zloop_new();
	if (sigfd < 0 || !body || !pub || !loop) {
		fprintf(stderr, "bus_floor: cannot start (signalfd, memory, or binding %s)\n",
			pub_ep);
		return 1;
	}
	zsock_t *sub = NULL;
	if (nsubs) {
		sub = zsock_new(ZMQ_SUB);
		for (int i = 0; i < nsubs; i++)
			if (zsock_connect(sub, "%s", subs[i]) != 0) {
				fprintf(stderr, "bus_floor: cannot connect %s\n", subs[i]);
				return 1;
			}
		for (int i = 0; i < nprefixes; i++)
			zsock_set_subscribe(sub, prefixes[i]);
		if (!nprefixes)
			zsock_set_subscribe(sub, "");
		zloop_reader(loop, sub, on_sub, pub);
	}
	zmq_pollitem_t sigitem = {.fd = sigfd, .events = ZMQ_POLLIN};
	zloop_poller(loop, &sigitem, on_signal, NULL);
	if (every_ms)
		zloop_timer(loop, (size_t)every_ms, 0, on_timer, pub);
	printf("ready\n");
	fflush(stdout);
	zloop_start(loop); /* until on_signal */
	zloop_destroy(&loop);
	zsock_destroy(&sub);
	zsock_destroy(&pub);
	free(body);
	return 0;
}
