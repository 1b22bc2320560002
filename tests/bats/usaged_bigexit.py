#!/usr/bin/env python3
"""Children that fill a large address space and exit, for usaged_exit_final.bats.

usage: usaged_bigexit.py N MIB    runs N children one after the other, each mapping MIB MiB
                                  (populated by the kernel, cheaper than touching each page)
                                  and exiting; prints "PID@TICKS CPU_NS" per child: its start
                                  time in clock ticks since boot (/proc/PID/stat field 22), which
                                  tells it from another process given the same pid before or after
                                  it, and its CPU time as wait4's rusage reports it (the
                                  scheduler's count, to the us)
Tearing that memory down is CPU time the child spends after sched_process_exit on kernels
that fire it before exit_mm() (6.16 and later).
"""
import mmap
import os
import sys


def main():
    n, mib = int(sys.argv[1]), int(sys.argv[2])
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
            m = mmap.mmap(-1, mib << 20, flags=flags)
            os._exit(len(m) & 0)
        # the child is there until it is waited for, a zombie at worst
        with open("/proc/%d/stat" % pid) as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        _, _, ru = os.wait4(pid, 0)
        print("%d@%d" % (pid, ticks), round((ru.ru_utime + ru.ru_stime) * 1e9), flush=True)


if __name__ == "__main__":
    main()
