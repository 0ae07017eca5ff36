"""How many threads a run should use on a CPU it may share: the CPUs free to this process now.

A recurrence runs thousands of small parallel steps; each waits for its slowest thread, so one thread that the
machine gives to another process stalls every step (measured on a busy 2-core Zen 4: 25.7 s with torch's default
threads, 7.5 s with one). The count is the CPUs this process may run on (its affinity mask) less the load the other
processes put on them (the one-minute load average, taken as spread evenly over the machine's CPUs), at most its
cgroup's CPU quota (cpu.max, as a container sets it), and at least one."""

import math
import os

CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"


def affinity_cpus():
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def cgroup_quota():
    """The CPUs the cgroup v2 quota allows ("QUOTA PERIOD" in cpu.max), or None without a quota."""
    try:
        with open(CGROUP_CPU_MAX) as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def load_average():
    """The one-minute load average of the machine, or 0 where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def free_cpus():
    """The threads a run should use now (module docstring), called before the run adds its own load."""
    cpus = affinity_cpus()
    others = load_average() * cpus / (os.cpu_count() or cpus)  # the share of the machine's load on our CPUs
    free = math.floor(cpus - others + 0.5)
    quota = cgroup_quota()
    return max(1, free if quota is None else min(free, math.floor(quota)))
