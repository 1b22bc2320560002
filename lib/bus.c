/*
 * PUB/SUB sockets of the bus: stamping and sending on one side; receiving,
 * checking, and counting losses, restarts and rejections on the other.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus.h"
#include "config.h"
#include "clock.h"
#include "heap.h"
#include "log.h"
#include "state.h"

/* ---- stats ---- */

uint64_t *wb_stats_counter(struct wb_stats *stats, const char *name)
{
	for (size_t i = 0; i < stats->ncounters; i++)
		if (strcmp(stats->counters[i].name, name) == 0)
			return &stats->counters[i].value;
	if (stats->ncounters >= WB_COUNTERS_MAX)
		return NULL;
	size_t i = stats->ncounters++;
	snprintf(stats->counters[i].name, sizeof(stats->counters[i].name), "%s", name);
	stats->counters[i].value = 0;
	return &stats->counters[i].value;
}

static uint64_t *counter_or_die(struct wb_stats *stats, const char *name)
{
	uint64_t *c = wb_stats_counter(stats, name);
	if (!c)
		fatalx(1 /* WB_EXIT_FAILURE */,
		       "stat counter %s: more than %d counters (WB_COUNTERS_MAX)", name,
		       WB_COUNTERS_MAX);
	return c;
}

void wb_stats_bind(struct wb_stats *stats, void *base, const struct wb_stat_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *c = counter_or_die(stats, rows[i].name);
		memcpy((char *)base + rows[i].off, &c, sizeof(c));
	}
}

void wb_stats_mirror(struct wb_stats *stats, const void *base, const struct wb_stat_row *rows,
		     size_t n)
{
	for (size_t i = 0; i < n; i++)
		memcpy(counter_or_die(stats, rows[i].name), (const char *)base + rows[i].off,
		       sizeof(uint64_t));
}

void wb_stats_reject(struct wb_stats *stats, enum wb_reason reason)
{
	if (!stats)
		return;
	stats->rejected++;
	if ((unsigned)reason < WB_R_COUNT)
		stats->rejected_by[reason]++;
}

/* ---- endpoints and socket options ---- */

/* Split "@tcp://..." / ">tcp://..." into the action and the bare endpoint. */
static const char *endpoint_bare(const char *endpoint, bool dflt_bind, bool *bind)
{
	*bind = dflt_bind;
	if (endpoint[0] == '@' || endpoint[0] == '>') {
		*bind = endpoint[0] == '@';
		return endpoint + 1;
	}
	return endpoint;
}

/* Make the directory of an ipc:// socket, so a fresh runtime dir works. */
static void ipc_mkdir(const char *ep)
{
	if (strncmp(ep, "ipc://", 6) != 0)
		return;
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", ep + 6);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(dir, wb_state_dir_mode());
			*p = '/';
		}
	mkdir(dir, wb_state_dir_mode());
}

/*
 * ZeroMQ unlinks an existing ipc socket file before binding, which would let a
 * second instance silently take the endpoint from a running one. Refuse when
 * something still accepts connections there.
 */
static bool ipc_in_use(const char *ep)
{
	if (strncmp(ep, "ipc://", 6) != 0)
		return false;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(ep + 6) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, ep + 6);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool used = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return used;
}

static void ipc_protect(const char *ep, const char *group)
{
	if (strncmp(ep, "ipc://", 6) != 0)
		return;
	const char *path = ep + 6;
	if (chmod(path, 0660) < 0)
		log_warn("ipc socket %s: chmod 0660", path);
	if (group && group[0]) {
		struct group *g = getgrnam(group);
		if (!g)
			log_warnx("ipc socket %s: group '%s' does not exist", path, group);
		else if (chown(path, (uid_t)-1, g->gr_gid) < 0)
			log_warn("ipc socket %s: chown to group %s", path, group);
	}
}

/* The socket file a bind made, so that a clean stop removes it and only it. */
struct ipc_file {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
};

static void ipc_remember(const char *ep, struct ipc_file *f)
{
	struct stat st;
	f->path[0] = '\0';
	if (strncmp(ep, "ipc://", 6) != 0 || ep[6] == '@' || strlen(ep + 6) >= sizeof(f->path) ||
	    stat(ep + 6, &st) < 0 || !S_ISSOCK(st.st_mode))
		return;
	strcpy(f->path, ep + 6);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
}

/* ZeroMQ leaves the file behind; a later instance may have bound the path anew, so check it is
 * ours. */
static void ipc_remove(struct ipc_file *f)
{
	struct stat st;
	if (f->path[0] && stat(f->path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino &&
	    unlink(f->path) < 0 && errno != ENOENT)
		log_warn("ipc socket %s: cannot remove", f->path);
	f->path[0] = '\0';
}

static bool curve_wanted(const struct wb_sockopts *o)
{
	return o && o->curve_cert && o->curve_cert[0];
}

/*
 * CURVE protects tcp:// endpoints; ipc:// sockets are protected by their file
 * mode and group. Security options apply to the connections made after they
 * are set, so a subscriber switches mechanism before each connect.
 */
static bool is_ipc(const char *ep)
{
	return strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0;
}

static int apply_curve(zsock_t *sock, const struct wb_sockopts *o, bool server, zactor_t **auth)
{
	if (!curve_wanted(o))
		return 0;
	zcert_t *cert = zcert_load(o->curve_cert);
	if (!cert) {
		log_errx("CURVE certificate %s: cannot load (make one with `wattbus keygen`)",
			 o->curve_cert);
		return -1;
	}
	zcert_apply(cert, sock);
	zcert_destroy(&cert);
	if (server) {
		*auth = zactor_new(zauth, NULL);
		if (!*auth) {
			log_errx("CURVE: cannot start the authentication actor");
			return -1;
		}
		const char *allow =
		    o->curve_allow && o->curve_allow[0] ? o->curve_allow : CURVE_ALLOW_ANY;
		zstr_sendx(*auth, "CURVE", allow, NULL);
		zsock_wait(*auth);
		zsock_set_zap_domain(sock, "wattbus");
		zsock_set_curve_server(sock, 1);
	} else {
		if (!o->curve_peer || !o->curve_peer[0]) {
			log_errx(
			    "CURVE: curve_cert is set but curve_peer (the publisher's public certificate) is not");
			return -1;
		}
		zcert_t *peer = zcert_load(o->curve_peer);
		if (!peer) {
			log_errx("CURVE peer certificate %s: cannot load", o->curve_peer);
			return -1;
		}
		zsock_set_curve_serverkey(sock, zcert_public_txt(peer));
		zcert_destroy(&peer);
	}
	return 0;
}

/* ---- publisher ---- */

struct wb_pub {
	zsock_t *sock;
	zactor_t *auth;
	char src[32];
	char host[64];
	uint64_t epoch;
	uint64_t sent;
	zhashx_t *seqs; /* topic -> uint64_t next seq */
	bool subscribed;
	struct ipc_file file;
};

struct wb_pub *wb_pub_new(const char *endpoint, const char *src, const char *host,
			  const struct wb_sockopts *opts)
{
	struct wb_pub *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	snprintf(self->src, sizeof(self->src), "%s", src);
	snprintf(self->host, sizeof(self->host), "%s", host ? host : "");
	self->epoch = wb_now_ns();
	self->seqs = zhashx_new();
	zhashx_set_destructor(self->seqs, (zhashx_destructor_fn *)zstr_free);
	self->sock = zsock_new(ZMQ_XPUB);
	if (!self->seqs || !self->sock)
		goto fail;
	zsock_set_sndhwm(self->sock, opts && opts->hwm > 0 ? opts->hwm : 10000);
	zsock_set_linger(self->sock, 1000);
	bool bind;
	const char *ep = endpoint_bare(endpoint, true, &bind);
	if (!is_ipc(ep) && apply_curve(self->sock, opts, true, &self->auth) < 0)
		goto fail;
	if (bind) {
		ipc_mkdir(ep);
		if (ipc_in_use(ep)) {
			log_errx("cannot bind %s: another process is listening there", ep);
			goto fail;
		}
		if (zsock_bind(self->sock, "%s", ep) < 0) {
			log_errx("cannot bind %s: %s", ep, zmq_strerror(zmq_errno()));
			goto fail;
		}
		ipc_protect(ep, opts ? opts->ipc_group : NULL);
		ipc_remember(ep, &self->file);
	} else if (zsock_connect(self->sock, "%s", ep) < 0) {
		log_errx("cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
		goto fail;
	}
	return self;
fail:
	wb_pub_destroy(&self);
	return NULL;
}

void wb_pub_destroy(struct wb_pub **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct wb_pub *self = *self_p;
	zsock_destroy(&self->sock);
	ipc_remove(&self->file);
	zactor_destroy(&self->auth);
	zhashx_destroy(&self->seqs);
	free(self);
	*self_p = NULL;
}

int wb_pub_send_raw(struct wb_pub *self, const char *topic, const void *buf, size_t len)
{
	void *s = zsock_resolve(self->sock);
	if (zmq_send(s, topic, strlen(topic), ZMQ_SNDMORE) < 0 || zmq_send(s, buf, len, 0) < 0) {
		if (zmq_errno() != EINTR)
			log_warnx("send %s: %s", topic, zmq_strerror(zmq_errno()));
		return -1;
	}
	self->sent++;
	return 0;
}

int wb_pub_next_seq(struct wb_pub *self, const char *topic, uint64_t *seq)
{
	uint64_t *next = zhashx_lookup(self->seqs, topic);
	if (!next) {
		next = calloc(1, sizeof(*next));
		if (!next || zhashx_insert(self->seqs, topic, next) < 0) {
			free(next);
			return -1;
		}
	}
	*seq = (*next)++;
	return 0;
}

int wb_pub_send(struct wb_pub *self, struct wb_msg *msg)
{
	if (msg->kind < 0 || msg->kind >= WB_NKINDS) {
		log_errx("send: message of unknown kind %d", (int)msg->kind);
		return -1;
	}
	struct wb_envelope *env = &msg->env;
	env->v = wb_kinds[msg->kind].version;
	snprintf(env->kind, sizeof(env->kind), "%s", wb_kinds[msg->kind].name);
	if (!env->host[0])
		snprintf(env->host, sizeof(env->host), "%s", self->host);
	if (!env->src[0])
		snprintf(env->src, sizeof(env->src), "%s", self->src);
	env->epoch = self->epoch;

	char topic[WB_TOPIC_MAX];
	snprintf(topic, sizeof(topic), "%s/%s", env->kind, env->host);
	if (wb_pub_next_seq(self, topic, &env->seq) < 0)
		return -1;

	char *buf;
	size_t len;
	struct wb_err err;
	if (wb_encode(msg, &buf, &len, &err) < 0) {
		log_errx("cannot encode %s message: %s", topic, err.msg);
		errno = EINVAL;
		return -1;
	}
	int rc = wb_pub_send_raw(self, topic, buf, len);
	free(buf);
	wb_heap_frame(len);
	return rc;
}

uint64_t wb_pub_epoch(const struct wb_pub *self)
{
	return self->epoch;
}

uint64_t wb_pub_sent(const struct wb_pub *self)
{
	return self->sent;
}

zsock_t *wb_pub_sock(struct wb_pub *self)
{
	return self->sock;
}

int wb_pub_wait_subscriber(struct wb_pub *self, int timeout_ms)
{
	if (self->subscribed)
		return 1;
	uint64_t end = wb_mono_ns() + (uint64_t)timeout_ms * WB_NS_PER_MS;
	for (;;) {
		uint64_t now = wb_mono_ns();
		if (now >= end)
			return 0;
		zmq_pollitem_t it = {zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0};
		if (zmq_poll(&it, 1, (long)((end - now) / WB_NS_PER_MS) + 1) < 0)
			return 0;
		if (!(it.revents & ZMQ_POLLIN))
			continue;
		zframe_t *f = zframe_recv(self->sock);
		bool sub = f && zframe_size(f) > 0 && zframe_data(f)[0] == 1;
		zframe_destroy(&f);
		if (sub) {
			self->subscribed = true;
			return 1;
		}
	}
}

/* ---- sequence tracking ---- */

#define DUP_EPOCHS 4 /* second producers' epochs remembered per name */

struct producer {
	uint64_t epoch;
	uint64_t seq;
	uint64_t seen_mono;
	uint64_t prev_epoch; /* the epoch before this one: if it comes back, two are alive */
	uint64_t refused[DUP_EPOCHS]; /* epochs of second producers (0: free) */
	uint32_t refused_run;	      /* refused messages since the last accepted one */
	uint32_t
	    takeover; /* refused_run that lets a refused epoch take over (0: WB_DUP_TAKEOVER) */
	uint64_t stale_seq; /* the last seq that was not after seq */
	bool stale_run;	    /* stale_seq is set: a stale one continuing it is a second run */
	bool interleaved;   /* said so already */
};

/* The one producer (src) of a kind/host, and the last other one that tried. */
struct owner {
	char src[sizeof(((struct wb_envelope *)0)->src)];
	uint64_t seen_mono;
	uint64_t gap_ns; /* its usual time between messages (a running mean) */
	char rival[sizeof(((struct wb_envelope *)0)->src)];
	uint32_t rival_run; /* the rival's messages since the owner's last one */
	uint32_t takeover;  /* rival_run that lets a rival take over (0: WB_DUP_TAKEOVER) */
};

struct wb_seqtrack {
	zhashx_t *map;	  /* "kind/host/src" -> struct producer */
	zhashx_t *owners; /* "kind/host" -> struct owner */
	size_t max;
};

struct wb_seqtrack *wb_seqtrack_new(size_t max_producers)
{
	struct wb_seqtrack *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->map = zhashx_new();
	if (!self->map) {
		free(self);
		return NULL;
	}
	zhashx_set_destructor(self->map, (zhashx_destructor_fn *)zstr_free);
	self->owners = zhashx_new();
	if (!self->owners) {
		zhashx_destroy(&self->map);
		free(self);
		return NULL;
	}
	zhashx_set_destructor(self->owners, (zhashx_destructor_fn *)zstr_free);
	self->max = max_producers ? max_producers : 4096;
	return self;
}

void wb_seqtrack_destroy(struct wb_seqtrack **self_p)
{
	if (!self_p || !*self_p)
		return;
	zhashx_destroy(&(*self_p)->map);
	zhashx_destroy(&(*self_p)->owners);
	free(*self_p);
	*self_p = NULL;
}

static bool listed(const struct wb_strlist *l, const char *s)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

const char *wb_seqtrack_owner(struct wb_seqtrack *self, const struct wb_envelope *env,
			      enum wb_kind kind, const struct wb_strlist *extra_power_src,
			      bool *is_owner)
{
	*is_owner = true;
	if (kind != WB_POWER && kind != WB_USAGE && kind != WB_ALIGNED && kind != WB_ESTIMATE)
		return NULL;
	if (kind == WB_POWER && listed(extra_power_src, env->src)) {
		*is_owner = false; /* a deliberate second meter: its own zones only */
		return NULL;
	}
	char key[WB_TOPIC_MAX];
	snprintf(key, sizeof(key), "%s/%s", env->kind, env->host);
	struct owner *o = zhashx_lookup(self->owners, key);
	uint64_t now = wb_mono_ns();
	if (!o) {
		if (zhashx_size(self->owners) >= self->max) {
			const char *oldest = NULL;
			uint64_t when = UINT64_MAX;
			for (struct owner *x = zhashx_first(self->owners); x;
			     x = zhashx_next(self->owners))
				if (x->seen_mono < when) {
					when = x->seen_mono;
					oldest = zhashx_cursor(self->owners);
				}
			if (oldest) {
				char k[WB_TOPIC_MAX];
				snprintf(k, sizeof(k), "%s", oldest);
				zhashx_delete(self->owners, k);
			}
		}
		o = calloc(1, sizeof(*o));
		if (!o || zhashx_insert(self->owners, key, o) < 0) {
			free(o);
			return NULL;
		}
		snprintf(o->src, sizeof(o->src), "%s", env->src);
		o->seen_mono = now;
		return NULL;
	}
	if (strcmp(o->src, env->src) == 0) {
		uint64_t gap = now - o->seen_mono;
		o->gap_ns = o->gap_ns ? (7 * o->gap_ns + gap) / 8 : gap;
		o->seen_mono = now;
		o->rival_run = 0;
		return NULL;
	}
	if (strcmp(o->rival, env->src) != 0) {
		snprintf(o->rival, sizeof(o->rival), "%s", env->src);
		o->rival_run = 0;
	}
	o->rival_run++;
	/* The owner stopped (a producer replaced by another of another name): silent for 8 of
	 * its own intervals while the rival sent its run. A faster rival cannot take over from
	 * a slower live owner, whose next message resets the run. */
	uint32_t need = o->takeover ? o->takeover : WB_DUP_TAKEOVER;
	uint64_t silent = now - o->seen_mono;
	if (o->rival_run >= need && silent > 8 * o->gap_ns) {
		log_warnx(
		    "%s: src '%s' takes over from src '%s', silent for %.1f s (%u messages of the new one and none of the old)",
		    key, env->src, o->src, (double)silent / 1e9, o->rival_run);
		snprintf(o->src, sizeof(o->src), "%s", env->src);
		o->rival[0] = '\0';
		o->rival_run = 0;
		o->seen_mono = now;
		o->gap_ns = 0;
		o->takeover = need < 4096 ? 2 * need : 4096;
		return NULL;
	}
	*is_owner = false;
	return o->src;
}

static void seqtrack_evict_oldest(struct wb_seqtrack *self)
{
	const char *oldest = NULL;
	uint64_t when = UINT64_MAX;
	for (struct producer *p = zhashx_first(self->map); p; p = zhashx_next(self->map))
		if (p->seen_mono < when) {
			when = p->seen_mono;
			oldest = zhashx_cursor(self->map);
		}
	if (oldest) {
		char key[WB_TOPIC_MAX + 40];
		snprintf(key, sizeof(key), "%s", oldest);
		zhashx_delete(self->map, key);
	}
}

static uint64_t *refused_slot(struct producer *p, uint64_t epoch)
{
	for (size_t i = 0; i < DUP_EPOCHS; i++)
		if (p->refused[i] == epoch)
			return &p->refused[i];
	return NULL;
}

static void refuse(struct producer *p, uint64_t epoch)
{
	uint64_t *free_slot = refused_slot(p, 0);
	if (!free_slot) { /* full: the oldest goes */
		memmove(p->refused, p->refused + 1, (DUP_EPOCHS - 1) * sizeof(p->refused[0]));
		free_slot = &p->refused[DUP_EPOCHS - 1];
	}
	*free_slot = epoch;
}

void wb_seqtrack_see(struct wb_seqtrack *self, const struct wb_envelope *env, const char *kind,
		     struct wb_rx *rx)
{
	char key[WB_TOPIC_MAX + 40];
	snprintf(key, sizeof(key), "%s/%s/%s", kind, env->host, env->src);
	rx->lost = 0;
	rx->first = rx->new_epoch = rx->stale = rx->duplicate = false;
	struct producer *p = zhashx_lookup(self->map, key);
	uint64_t *refused = p && env->epoch ? refused_slot(p, env->epoch) : NULL;
	if (!p) {
		if (zhashx_size(self->map) >= self->max)
			seqtrack_evict_oldest(self);
		p = calloc(1, sizeof(*p));
		if (!p || zhashx_insert(self->map, key, p) < 0) {
			free(p);
			return;
		}
		rx->first = true;
	} else if (refused) {
		p->seen_mono = wb_mono_ns();
		if (++p->refused_run < (p->takeover ? p->takeover : WB_DUP_TAKEOVER)) {
			rx->duplicate = true;
			return;
		}
		log_warnx(
		    "%s: epoch %llu takes over: %d of its messages and none of epoch %llu, which has stopped",
		    key, (unsigned long long)env->epoch, WB_DUP_TAKEOVER,
		    (unsigned long long)p->epoch);
		*refused = 0;
		/* The next takeover needs twice as many: a fast producer cannot keep displacing
		 * a slow one that is still alive. */
		uint32_t n = p->takeover ? p->takeover : WB_DUP_TAKEOVER;
		p->takeover = n < 4096 ? 2 * n : 4096;
		rx->new_epoch = true;
		p->prev_epoch = p->epoch;
	} else if (p->epoch != env->epoch) {
		if (p->prev_epoch && env->epoch == p->prev_epoch) {
			log_warnx(
			    "%s: two live producers: epoch %llu is back after %llu (one host name on two machines, a cloned VM?); refusing epoch %llu, counted as duplicate_producer",
			    key, (unsigned long long)env->epoch, (unsigned long long)p->epoch,
			    (unsigned long long)env->epoch);
			refuse(p, env->epoch);
			p->refused_run = 1;
			p->seen_mono = wb_mono_ns();
			rx->duplicate = true;
			return;
		}
		rx->new_epoch = true;
		p->prev_epoch = p->epoch;
	} else if (env->seq <= p->seq) {
		if (p->stale_run && env->seq == p->stale_seq + 1) {
			if (!p->interleaved)
				log_warnx(
				    "%s: two live producers: two runs of seq interleave in epoch %llu (a second process with the same name and epoch); refusing the lower run, counted as duplicate_producer",
				    key, (unsigned long long)env->epoch);
			p->interleaved = true;
			rx->duplicate = true;
		} else {
			rx->stale = true;
		}
		p->stale_seq = env->seq;
		p->stale_run = true;
		p->seen_mono = wb_mono_ns();
		return;
	} else {
		rx->lost = env->seq - p->seq - 1;
	}
	p->refused_run = 0;
	p->epoch = env->epoch;
	p->seq = env->seq;
	p->seen_mono = wb_mono_ns();
}

/* ---- subscriber ---- */

struct wb_sub {
	zsock_t *sock;
	struct wb_seqtrack *seq;
	struct wb_bound *bound; /* NULL: no energy bound, no zone owners */
	struct wb_ratelimit rl;
	struct wb_ratelimit rl_epoch; /* its own, so that rejected frames do not hide restarts */
	struct wb_sockopts opts;
	bool curve_on; /* the next connect uses CURVE */
};

struct wb_sub *wb_sub_new(const struct wb_sockopts *opts)
{
	struct wb_sub *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->rl = self->rl_epoch = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	self->sock = zsock_new(ZMQ_SUB);
	self->seq = wb_seqtrack_new(0);
	if (!self->sock || !self->seq)
		goto fail;
	zsock_set_rcvhwm(self->sock, opts && opts->hwm > 0 ? opts->hwm : 10000);
	zsock_set_linger(self->sock, 0);
	/* A publisher that is not there (modeld where none runs, a stage not started yet)
	 * is tried again 100 ms later, then at doubling intervals up to this, instead of ten
	 * times a second for good: each try wakes the I/O thread. */
	zsock_set_reconnect_ivl_max(self->sock, opts && opts->reconnect_max_ms > 0
						    ? opts->reconnect_max_ms
						    : WB_RECONNECT_MAX_MS);
	/* ZeroMQ drops a larger message (and its connection) before it is buffered whole. */
	zsock_set_maxmsgsize(self->sock, (int)WB_FRAME_MAX);
	if (opts)
		self->opts = *opts;
	/* 65,536 zone records, some 8 MiB, for 256 hosts of 256 zones or 16,384 of 4 */
	if (opts &&
	    (opts->plaus.max_zone_w > 0 || opts->plaus.max_host_w > 0 ||
	     opts->plaus.one_producer) &&
	    !(self->bound = wb_bound_new(65536)))
		goto fail;
	if (curve_wanted(opts) && opts->curve_peer && opts->curve_peer[0]) {
		/* Check the certificates now, so a bad path is a startup error. Without a
		 * curve_peer, a stage that publishes with CURVE may still subscribe over ipc://;
		 * a tcp:// endpoint is refused when it is connected. */
		zactor_t *none = NULL;
		if (apply_curve(self->sock, opts, false, &none) < 0)
			goto fail;
		self->curve_on = true;
	}
	return self;
fail:
	wb_sub_destroy(&self);
	return NULL;
}

void wb_sub_destroy(struct wb_sub **self_p)
{
	if (!self_p || !*self_p)
		return;
	zsock_destroy(&(*self_p)->sock);
	wb_seqtrack_destroy(&(*self_p)->seq);
	wb_bound_destroy(&(*self_p)->bound);
	free(*self_p);
	*self_p = NULL;
}

static int sub_connect_one(struct wb_sub *self, const char *endpoint)
{
	bool bind;
	const char *ep = endpoint_bare(endpoint, false, &bind);
	bool want = curve_wanted(&self->opts) && !is_ipc(ep);
	if (want && !self->curve_on) {
		zactor_t *none = NULL;
		if (apply_curve(self->sock, &self->opts, false, &none) < 0)
			return -1;
		self->curve_on = true;
	} else if (!want && self->curve_on) {
		zsock_set_plain_server(self->sock, 0); /* back to the NULL mechanism */
		self->curve_on = false;
	}
	int rc = bind ? zsock_bind(self->sock, "%s", ep) : zsock_connect(self->sock, "%s", ep);
	if (rc < 0) {
		log_errx("cannot %s %s: %s", bind ? "bind" : "connect to", ep,
			 zmq_strerror(zmq_errno()));
		return -1;
	}
	return 0;
}

int wb_sub_connect(struct wb_sub *self, const char *endpoints)
{
	/* "a,b,c": one SUB socket may read from several publishers. */
	char *copy = strdup(endpoints), *save = NULL;
	if (!copy)
		return -1;
	int rc = 0;
	for (char *ep = strtok_r(copy, ",", &save); ep && rc == 0; ep = strtok_r(NULL, ",", &save))
		rc = sub_connect_one(self, ep);
	free(copy);
	return rc;
}

int wb_sub_subscribe(struct wb_sub *self, const char *prefix)
{
	zsock_set_subscribe(self->sock, prefix);
	return 0;
}

zsock_t *wb_sub_sock(struct wb_sub *self)
{
	return self->sock;
}

int wb_sub_wait(struct wb_sub *self, int timeout_ms)
{
	zmq_pollitem_t it = {zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0};
	return zmq_poll(&it, 1, timeout_ms) > 0 && (it.revents & ZMQ_POLLIN);
}

int wb_frame_check(const char *topic, const void *body, size_t len, struct wb_msg *out,
		   struct wb_err *err)
{
	if (wb_decode(body, len, out, err) < 0)
		return -1;
	char want[WB_TOPIC_MAX];
	snprintf(want, sizeof(want), "%s/%s", out->env.kind, out->env.host);
	if (strcmp(topic, want) != 0) {
		err->reason = WB_R_TOPIC;
		snprintf(err->msg, sizeof(err->msg),
			 "topic '%.60s' does not match the message's kind/host '%s'", topic, want);
		wb_msg_clear(out);
		return -1;
	}
	return 0;
}

/* Receive all frames of one message; topic and body are the first two, extra frames are counted and
 * dropped. */
static int recv_frames(struct wb_sub *self, int flags, zmq_msg_t *topic, zmq_msg_t *body,
		       int *nframes)
{
	void *s = zsock_resolve(self->sock);
	zmq_msg_init(topic);
	zmq_msg_init(body);
	*nframes = 0;
	if (zmq_msg_recv(topic, s, flags) < 0)
		return -1;
	*nframes = 1;
	if (!zmq_msg_more(topic))
		return 0;
	if (zmq_msg_recv(body, s, 0) < 0)
		return -1;
	*nframes = 2;
	int more = zmq_msg_more(body);
	while (more) {
		zmq_msg_t extra;
		zmq_msg_init(&extra);
		if (zmq_msg_recv(&extra, s, 0) < 0) {
			zmq_msg_close(&extra);
			return -1;
		}
		more = zmq_msg_more(&extra);
		zmq_msg_close(&extra);
		(*nframes)++;
	}
	return 0;
}

static int sub_recv(struct wb_sub *self, int flags, struct wb_msg *out, struct wb_rx *rx,
		    struct wb_err *err, struct wb_stats *stats)
{
	zmq_msg_t topic, body;
	int nframes;
	memset(rx, 0, sizeof(*rx));
	out->kind = WB_KIND_NONE;
	if (recv_frames(self, flags, &topic, &body, &nframes) < 0) {
		int e = zmq_errno();
		zmq_msg_close(&topic);
		zmq_msg_close(&body);
		errno = e;
		return -1;
	}
	rx->recv_ns = wb_now_ns();
	size_t body_len = zmq_msg_size(&body);
	size_t tlen = zmq_msg_size(&topic);
	snprintf(rx->topic, sizeof(rx->topic), "%.*s",
		 (int)(tlen < WB_TOPIC_MAX ? tlen : WB_TOPIC_MAX - 1),
		 (const char *)zmq_msg_data(&topic));
	if (stats)
		stats->frames_in++;
	int rc;
	if (nframes != 2) {
		err->reason = WB_R_TOPIC;
		snprintf(err->msg, sizeof(err->msg), "expected 2 frames (topic, map), got %d",
			 nframes);
		rc = -1;
	} else if (tlen >= WB_TOPIC_MAX || memchr(zmq_msg_data(&topic), '\0', tlen)) {
		err->reason = WB_R_TOPIC;
		snprintf(err->msg, sizeof(err->msg), "topic of %zu bytes is not a KIND/HOST string",
			 tlen);
		rc = -1;
	} else {
		rc = wb_frame_check(rx->topic, zmq_msg_data(&body), zmq_msg_size(&body), out, err);
	}
	zmq_msg_close(&topic);
	zmq_msg_close(&body);
	if (rc == 0 && wb_plaus_check(&self->opts.plaus, out, rx->recv_ns, err) < 0) {
		wb_msg_clear(out);
		rc = -1;
	}
	bool owner = true;
	if (rc == 0 && self->opts.plaus.one_producer) {
		const char *first = wb_seqtrack_owner(self->seq, &out->env, out->kind,
						      self->opts.plaus.extra_src, &owner);
		if (first) {
			err->reason = WB_R_DUP_PRODUCER;
			snprintf(
			    err->msg, sizeof(err->msg),
			    "src '%s' (epoch %llu) is a second producer beside src '%s', which keeps the host (a deliberate second meter: [global] extra_power_src)",
			    out->env.src, (unsigned long long)out->env.epoch, first);
			wb_msg_clear(out);
			rc = -1;
		}
	}
	if (rc == 0) {
		wb_seqtrack_see(self->seq, &out->env, out->env.kind, rx);
		if (rx->duplicate) {
			err->reason = WB_R_DUP_PRODUCER;
			snprintf(err->msg, sizeof(err->msg),
				 "epoch %llu seq %llu of src '%s' is a second live producer",
				 (unsigned long long)out->env.epoch,
				 (unsigned long long)out->env.seq, out->env.src);
			wb_msg_clear(out);
			rc = -1;
		}
	}
	if (rc == 0 && wb_bound_check(self->bound, &self->opts.plaus, out, owner, err) < 0) {
		wb_msg_clear(out);
		rc = -1;
	}
	rx->second_meter = rc == 0 && !owner;
	if (rc < 0) {
		wb_stats_reject(stats, err->reason);
		log_rl(&self->rl, WB_LOG_WARN, "rejected frame on topic '%s' (%s): %s", rx->topic,
		       wb_reason_name(err->reason), err->msg);
		return 0;
	}
	if (stats) {
		stats->lost += rx->lost;
		stats->restarts += rx->new_epoch;
		stats->stale += rx->stale;
	}
	if (rx->lost)
		log_rl(&self->rl, WB_LOG_INFO, "%s from %s: %llu messages lost before seq %llu",
		       rx->topic, out->env.src, (unsigned long long)rx->lost,
		       (unsigned long long)out->env.seq);
	if (rx->new_epoch)
		log_rl(&self->rl_epoch, WB_LOG_INFO,
		       "%s from %s: producer restarted (new epoch %llu)", rx->topic, out->env.src,
		       (unsigned long long)out->env.epoch);
	/* Only a frame taken in sizes the heap: a refused one (forged, 64 MiB) does not. */
	wb_heap_frame(body_len);
	return 1;
}

int wb_sub_recv(struct wb_sub *self, struct wb_msg *out, struct wb_rx *rx, struct wb_err *err,
		struct wb_stats *stats)
{
	return sub_recv(self, 0, out, rx, err, stats);
}

int wb_sub_try_recv(struct wb_sub *self, struct wb_msg *out, struct wb_rx *rx, struct wb_err *err,
		    struct wb_stats *stats)
{
	return sub_recv(self, ZMQ_DONTWAIT, out, rx, err, stats);
}

int wb_sub_recv_raw(struct wb_sub *self, char **topic, char **body, size_t *len, int *nframes)
{
	zmq_msg_t t, b;
	*topic = *body = NULL;
	*len = 0;
	if (recv_frames(self, 0, &t, &b, nframes) < 0) {
		zmq_msg_close(&t);
		zmq_msg_close(&b);
		return -1;
	}
	*topic = strndup(zmq_msg_data(&t), zmq_msg_size(&t));
	*len = zmq_msg_size(&b);
	*body = malloc(*len ? *len : 1);
	if (*body)
		memcpy(*body, zmq_msg_data(&b), *len);
	zmq_msg_close(&t);
	zmq_msg_close(&b);
	if (!*topic || !*body) {
		free(*topic);
		free(*body);
		*topic = *body = NULL;
		return -1;
	}
	return 0;
}
