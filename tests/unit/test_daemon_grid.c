/* The wall-clock grid's tick arithmetic (lib/daemon.c): which grid instant a wake-up stands for. */
#include "daemon.h"
#include "unit.h"

#define MS 1000000ull
#define S 1000000000ull

static void test_on_time(void)
{
	struct wb_grid_tick tk;
	wb_grid_tick_at(10 * S + 120000, S, 1, &tk);
	CHECK_U64(tk.t_ns, 10 * S);
	CHECK_U64(tk.late_ns, 120000);
	CHECK_U64(tk.missed, 0);
	wb_grid_tick_at(20 * MS, 10 * MS, 1, &tk);
	CHECK_U64(tk.t_ns, 20 * MS);
	CHECK_U64(tk.late_ns, 0);
}

/* Woke 2.3 intervals late: the timer counted 3 expirations; two grid instants were skipped
 * and the sample stands for the latest. */
static void test_late_skips(void)
{
	struct wb_grid_tick tk;
	wb_grid_tick_at(12 * S + 300 * MS, S, 3, &tk);
	CHECK_U64(tk.t_ns, 12 * S);
	CHECK_U64(tk.late_ns, 300 * MS);
	CHECK_U64(tk.missed, 2);
	/* 3 s slots read 1.5 s after their instant */
	wb_grid_tick_at(9 * S + 1500 * MS, 3 * S, 1, &tk);
	CHECK_U64(tk.t_ns, 9 * S);
	CHECK_U64(tk.late_ns, 1500 * MS);
	CHECK_U64(tk.missed, 0);
}

static const struct unit_case cases[] = {
    {"on_time", test_on_time},
    {"late_skips", test_late_skips},
};
UNIT_MAIN(cases)
