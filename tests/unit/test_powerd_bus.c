/*
 * powerd's bus source against a publisher on an ipc socket standing in for
 * `wattbus vmpub`: the host's cumulative totals become a counter that never
 * goes back nor counts twice across a new host count or an older checkpoint
 * (lib/follow.h's rule), lost messages cost nothing, and the host's slot times
 * are mapped onto this clock.
 */
#include <unistd.h>

#include "bus.h"
#include "clock.h"
#include "../../powerd/powerd.h"
#include "unit.h"

#define S 1000000000ull

static char dir[200];
static char ep[256];
static struct wb_pub *pub;
static struct pd_set *set;
static struct pd_opts opts;
static void *conf; /* [powerd], powerd's key table */
static uint64_t mono;

/* Set one key of conf (powerd's defaults until then). */
static void set_key(const char *key, const char *value)
{
	char err[WB_CONF_ERR_MAX];
	if (!conf)
		CHECK((conf = pd_conf_new()) != NULL);
	if (pd_conf_set(conf, key, value, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
}

/* One estimate of host: zone package-0 at total uj, slot ending at t1 with its own energy own_uj,
 * in count epoch. */
static void send_host(const char *host, uint64_t t1, uint64_t epoch, uint64_t uj, uint64_t own_uj)
{
	struct wb_est_zone z = {
	    .name = "package-0", .zone = "package", .total_uj = uj, .energy_uj = own_uj};
	struct wb_msg m = {.kind = WB_ESTIMATE};
	snprintf(m.estimate.env.host, sizeof(m.estimate.env.host), "%s", host);
	snprintf(m.estimate.mode, sizeof(m.estimate.mode), "measured");
	m.estimate.t0 = t1 - S;
	m.estimate.t1 = t1;
	m.estimate.ncpu = 1;
	m.estimate.total_epoch = epoch;
	m.estimate.zones = &z;
	m.estimate.n_zones = 1;
	CHECK(wb_pub_send(pub, &m) == 0);
}

static void send_est(uint64_t t1, uint64_t epoch, uint64_t uj, uint64_t own_uj)
{
	send_host("vm1", t1, epoch, uj, own_uj);
}

/* Take what arrived (the frames counted reach want), then sample at guest time t. */
static uint64_t sample_at(uint64_t t, uint64_t want_frames)
{
	uint64_t end = wb_mono_ns() + 10 * S;
	while (pd_set_counter(set, "bus_frames") < want_frames && wb_mono_ns() < end) {
		usleep(1000);
		bus_source.on_readable(set);
	}
	CHECK_U64(pd_set_counter(set, "bus_frames"), want_frames);
	mono += 1000 * S;
	bus_source.sample(set, t, mono);
	return set->n ? set->zones[0].energy_uj : 0;
}

static void setup(void)
{
	CHECK(mkdtemp(unit_tmp(dir, sizeof(dir), "wb-bus-XXXXXX")) != NULL);
	snprintf(ep, sizeof(ep), "ipc://%s/vmpub.sock", dir);
	pub = wb_pub_new(ep, "vmpub", "vm1", &(struct wb_sockopts){0});
	CHECK(pub != NULL);
	pd_conf_destroy(&conf);
	set_key("bus_sub", ep);
	set_key("bus_vm", "vm1");
	set_key("bus_wait", "1ns");
	pd_opts_from_conf(&opts, conf, 5000, 0);
	opts.interval_ns = S;
	set = pd_set_new(&opts);
	char why[256];
	char err[256];
	CHECK(bus_source.check(&opts, err, sizeof(err)) == 0);
	CHECK(bus_source.discover(set, &opts, why, sizeof(why)) == 1); /* zones come later */
	CHECK(wb_pub_wait_subscriber(pub, 10000) == 1);
}

static void counts_and_clock(void)
{
	setup();
	uint64_t now = wb_now_ns();
	uint64_t b = now - 10 * S, a = b - 1000 * S; /* 1 kW over 1000 s */
	send_est(a, 7, 1000, 1000);
	send_est(b, 7, 1000 + 1000000000ull, 1000000);
	/* Half-way between the two host points, on this clock (the mapping's error is the
	 * delivery time, a few ms of 1000 s). */
	uint64_t v = sample_at(wb_now_ns() - 500 * S, 2);
	CHECK_U64(set->n, 1);
	CHECK_STR(set->zones[0].name, "package-0");
	CHECK_STR(set->zones[0].kind, "package");
	CHECK(v > 1000 + 500000000ull - 1000000 && v < 1000 + 500000000ull + 1000000);
	CHECK(pd_set_counter(set, "bus_offset_ns") >= 10 * S);
	/* Never past the last point, and never back. */
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 2), 1000 + 1000000000ull);
	CHECK_U64(sample_at(wb_now_ns() - 900 * S, 2), 1000 + 1000000000ull);

	/* A new count of the host (estimd without its state): the slot's own energy (here all
	 * of the count: its first slot), then its differences. */
	uint64_t base = 1000 + 1000000000ull;
	send_est(b + S, 8, 500, 500);
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 3), base + 500);
	CHECK_U64(pd_set_counter(set, "bus_resets"), 1);
	/* The count going back (estimd resumed from a checkpoint at 200, 100 since): the
	 * slot's own 100 counts and 300 is the new baseline. Held at 500 (the old rule) it
	 * would lose these 200; all of 300 would count the 200 twice. */
	send_est(b + 2 * S, 8, 300, 100);
	send_est(b + 3 * S, 8, 400, 100);
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 5), base + 700);
	CHECK_U64(pd_set_counter(set, "bus_resets"), 2); /* one for the total that went back */
	/* A lost message costs nothing: the next total brings it in. */
	uint64_t seq;
	CHECK(wb_pub_next_seq(pub, "estimate/vm1", &seq) == 0);
	send_est(b + 5 * S, 8, 700, 100);
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 6), base + 1000);
	CHECK_U64(pd_set_counter(set, "bus_lost"), 1);
	/* vm10's frames match the topic prefix estimate/vm1 but are refused. */
	send_host("vm10", b + 6 * S, 8, 1, 1);
	send_est(b + 6 * S, 8, 800, 100);
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 7), base + 1100);
	CHECK_U64(pd_set_counter(set, "bus_rejected"), 1);
	/* A total past the bound over the time since the last message (5 kW for 1 s): the
	 * slot's own energy. */
	send_est(b + 7 * S, 8, 800 + 6000000000ull, 100);
	CHECK_U64(sample_at(wb_now_ns() + 3600 * S, 8), base + 1200);
	CHECK_U64(pd_set_counter(set, "bus_resets"), 3);
	/* Host times that moved against this clock by more than an interval were counted: the
	 * first point (1000 s back) and the ones sent together, seconds apart in host time. */
	CHECK(pd_set_counter(set, "bus_clock_steps") >= 1);

	pd_set_destroy(&set);
	wb_pub_destroy(&pub);
	char sock[300];
	snprintf(sock, sizeof(sock), "%s/vmpub.sock", dir);
	unlink(sock);
	rmdir(dir);
}

static void settings(void)
{
	char err[256];
	pd_conf_destroy(&conf);
	set_key("bus_vm", "vm1");
	struct pd_opts o;
	pd_opts_from_conf(&o, conf, 0, 0);
	CHECK(bus_source.check(&o, err, sizeof(err)) < 0);
	CHECK(strstr(err, "bus_sub") != NULL);
	set_key("bus_sub", "tcp://10.0.0.1:5610");
	set_key("bus_vm", "");
	CHECK(bus_source.check(&o, err, sizeof(err)) < 0);
	CHECK(strstr(err, "bus_vm") != NULL);
	set_key("bus_vm", "vm1");
	set_key("bus_curve_cert", "/etc/wattbus/keys/vm1");
	CHECK(bus_source.check(&o, err, sizeof(err)) < 0);
	CHECK(strstr(err, "bus_curve_peer") != NULL);
	set_key("bus_curve_peer", "/etc/wattbus/keys/host.pub");
	CHECK(bus_source.check(&o, err, sizeof(err)) == 0);
	pd_conf_destroy(&conf);
}

static const struct unit_case cases[] = {
    {"host counts, lost messages and the clock mapping", counts_and_clock},
    {"settings the source needs", settings},
};

UNIT_MAIN(cases)
