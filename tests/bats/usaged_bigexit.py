#!/usr/bin/env python3
"""Children that fill a large address space and exit, for usaged_exit_final.bats.

usage: usaged_bigexit.py N MIB    runs N children one after the other, each mapping MIB MiB
                                  (populated by the kernel, cheaper than touching each page)
                                  and exiting; prints "PID CPU_NS" per child, its CPU time as
                                  wait4's rusage reports it (the scheduler's count, to the us)
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
        _, _, ru = os.wait4(pid, 0)
        print(pid, round((ru.ru_utime + ru.ru_stime) * 1e9), flush=True)


if __name__ == "__main__":
    main()
