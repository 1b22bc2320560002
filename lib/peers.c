/*
 * What the HTTP side knows about each client address: how many connections it
 * holds (for the reserved connections) and its failed basic-auth attempts (for
 * the penalty). Pure: times are passed in, addresses come as sockaddrs.
 * A bounded czmq hash table keyed by address; IPv6 clients are keyed by their
 * /64, since one host usually owns a whole /64.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "httpd.h"

#define PENALTY_MAX_SHIFT 10 /* the penalty doubles per failure up to 1024 x auth_penalty */
#define FORGET_SHIFT 11	     /* failures are forgotten 2048 x auth_penalty after the last */

struct peer {
	unsigned conns;
	unsigned failures;     /* failed attempts since the last success */
	uint64_t last_fail_ns; /* when the last one was */
	uint64_t until_ns;     /* answers are 429 until then */
};

struct peers {
	struct peer_limits lim;
	zhashx_t *map; /* key -> struct peer */
};

int peers_key(const struct sockaddr *sa, char *key, size_t len)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		return inet_ntop(AF_INET, &s4->sin_addr, key, (socklen_t)len) ? 0 : -1;
	}
	if (sa->sa_family != AF_INET6)
		return -1;
	struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&a))
		return inet_ntop(AF_INET, &a.s6_addr[12], key, (socklen_t)len) ? 0 : -1;
	memset(&a.s6_addr[8], 0, 8);
	char buf[INET6_ADDRSTRLEN];
	if (!inet_ntop(AF_INET6, &a, buf, sizeof buf))
		return -1;
	return snprintf(key, len, "%s/64", buf) < (int)len ? 0 : -1;
}

struct peers *peers_new(const struct peer_limits *lim)
{
	struct peers *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	self->lim = *lim;
	self->map = zhashx_new();
	if (!self->map) {
		free(self);
		return NULL;
	}
	zhashx_set_destructor(self->map, (zhashx_destructor_fn *)zstr_free);
	return self;
}

void peers_destroy(struct peers **self_p)
{
	if (!self_p || !*self_p)
		return;
	zhashx_destroy(&(*self_p)->map);
	free(*self_p);
	*self_p = NULL;
}

size_t peers_size(const struct peers *self)
{
	return zhashx_size(self->map);
}

static bool forgettable(const struct peers *self, const struct peer *p, uint64_t now_ns)
{
	uint64_t forget_ns = self->lim.penalty_ns << FORGET_SHIFT;
	return !p->conns && now_ns >= p->until_ns &&
	       (!p->failures || now_ns - p->last_fail_ns >= forget_ns);
}

/* Drop the entry when it holds nothing worth keeping. */
static void settle(struct peers *self, const char *key, struct peer *p, uint64_t now_ns)
{
	if (forgettable(self, p, now_ns))
		zhashx_delete(self->map, key);
}

/*
 * The entry of key, made when absent. A full table first forgets what can be
 * forgotten, then the connection-less entry whose last failure is oldest: an
 * attacker with more addresses than max_peers gets shorter penalties, not more
 * memory. NULL when everything holds a connection or on ENOMEM.
 */
static struct peer *peer_get(struct peers *self, const char *key, uint64_t now_ns)
{
	struct peer *p = zhashx_lookup(self->map, key);
	if (p)
		return p;
	if (zhashx_size(self->map) >= self->lim.max_peers) {
		const char *victim = NULL;
		uint64_t oldest = UINT64_MAX;
		for (struct peer *q = zhashx_first(self->map); q; q = zhashx_next(self->map)) {
			if (q->conns)
				continue;
			uint64_t t = forgettable(self, q, now_ns) ? 0 : q->last_fail_ns;
			if (t < oldest || !victim) {
				oldest = t;
				victim = zhashx_cursor(self->map);
			}
		}
		if (!victim)
			return NULL;
		zhashx_delete(self->map, victim);
	}
	p = calloc(1, sizeof *p);
	if (!p || zhashx_insert(self->map, key, p) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

unsigned peers_conns(const struct peers *self, const char *key)
{
	const struct peer *p = zhashx_lookup(self->map, key);
	return p ? p->conns : 0;
}

int peers_conn_add(struct peers *self, const char *key, uint64_t now_ns)
{
	struct peer *p = peer_get(self, key, now_ns);
	if (!p)
		return -1;
	p->conns++;
	return 0;
}

void peers_conn_del(struct peers *self, const char *key, uint64_t now_ns)
{
	struct peer *p = zhashx_lookup(self->map, key);
	if (!p)
		return;
	if (p->conns)
		p->conns--;
	settle(self, key, p, now_ns);
}

bool peers_blocked(struct peers *self, const char *key, uint64_t now_ns, uint64_t *left_ns)
{
	struct peer *p = zhashx_lookup(self->map, key);
	if (!p || now_ns >= p->until_ns)
		return false;
	if (left_ns)
		*left_ns = p->until_ns - now_ns;
	return true;
}

void peers_auth_failed(struct peers *self, const char *key, uint64_t now_ns)
{
	struct peer *p = peer_get(self, key, now_ns);
	if (!p)
		return;
	if (p->failures && now_ns - p->last_fail_ns >= self->lim.penalty_ns << FORGET_SHIFT)
		p->failures = 0;
	p->failures++;
	p->last_fail_ns = now_ns;
	if (p->failures >= self->lim.max_failures) {
		unsigned shift = p->failures - self->lim.max_failures;
		if (shift > PENALTY_MAX_SHIFT)
			shift = PENALTY_MAX_SHIFT;
		p->until_ns = now_ns + (self->lim.penalty_ns << shift);
	}
}

void peers_auth_ok(struct peers *self, const char *key, uint64_t now_ns)
{
	struct peer *p = zhashx_lookup(self->map, key);
	if (!p)
		return;
	p->failures = 0;
	p->until_ns = 0;
	settle(self, key, p, now_ns);
}
