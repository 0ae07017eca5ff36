"""How many threads a run should use on a CPU it may share: the CPUs free to this process now.

A recurrence runs thousands of small parallel steps; each waits for its slowest thread, so one thread that the
machine gives to another process stalls every step (docs/speed.md measures it). The count is the CPUs this process
may run on (its affinity mask) less the load the other processes put on them now (the tasks the kernel has runnable,
/proc/loadavg's fourth field, less this one; taken as spread evenly over the machine's CPUs), at most its cgroup's
CPU quota (cpu.max, as a container sets it), and at least one. Not the one-minute load average (read only where
there is no /proc): it lags, so a run started right after another (a benchmark, a script that embeds file after
file) would see that one's load and take one thread on an idle machine. OMP_NUM_THREADS, where it is a count, names
the count instead, at most the CPUs of the affinity mask (`requested_threads`)."""

import contextlib
import functools
import logging
import math
import os
import time

logger = logging.getLogger(__name__)

CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"
THREADS_VARIABLE = "OMP_NUM_THREADS"


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


PROC_LOADAVG = "/proc/loadavg"


def other_load(samples=5, interval=0.02):
    """The tasks other than this one that the kernel has runnable now (the median of a few readings of
    /proc/loadavg's "runnable/total" field, less this reader); where there is no /proc, the one-minute load
    average; 0 where the system has neither."""
    counts = []
    for i in range(samples):
        try:
            with open(PROC_LOADAVG) as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            break
        if i + 1 < samples:
            time.sleep(interval)
    if counts:
        return max(0, sorted(counts)[len(counts) // 2])
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def free_cpus():
    """The threads a run should use now (module docstring), called before the run adds its own load."""
    cpus = affinity_cpus()
    others = other_load() * cpus / (os.cpu_count() or cpus)  # the share of the machine's load on our CPUs
    free = math.floor(cpus - others + 0.5)
    quota = cgroup_quota()
    return max(1, free if quota is None else min(free, math.floor(quota)))


@contextlib.contextmanager
def cpu_threads(threads, runtime):
    """Around a run of a PyTorch model: torch's threads set to `threads` (default: OMP_NUM_THREADS as
    `requested_threads` takes it, else the CPUs free to this process now, `free_cpus`), and back afterwards. Yields
    the count the model runs with (None for a model in another `runtime`: an exported graph's onnxruntime threads are
    set when it loads)."""
    if runtime != "torch":
        yield None
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads or requested_threads() or free_cpus())
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def requested_threads():
    """The threads OMP_NUM_THREADS asks for, as a run takes them (`threads_asked`), or None where it is unset."""
    value = os.environ.get(THREADS_VARIABLE)
    return None if value is None else threads_asked(value, affinity_cpus())


@functools.cache
def threads_asked(value, cpus):
    """The threads OMP_NUM_THREADS=`value` asks for: None where it is not a whole number above 0 (`0`, `-1`, `abc`,
    empty: treated as unset, where OpenMP would warn and take every CPU); at most `cpus`, the CPUs this process may
    use (more only wait on each other, and tens of thousands crash OpenMP). Either change is said in one warning
    line, once a process (cached). A list for nested levels ("4,2") counts by its first number."""
    first = value.split(",")[0].strip()
    count = int(first) if first.isascii() and first.isdigit() else 0
    if count < 1:
        logger.warning(
            f"{THREADS_VARIABLE}={value!r} is not a number of threads, so it is ignored and the threads are "
            f"chosen as where it is unset: set {THREADS_VARIABLE} to a whole number from 1 to {cpus}, or "
            "unset it"
        )
        return None
    if count > cpus:
        logger.warning(
            f"{THREADS_VARIABLE}={value} asks for more threads than the {cpus} CPUs this process may use, "
            f"so {cpus} are used: set {THREADS_VARIABLE} to {cpus} or fewer"
        )
        return cpus
    return count


def settle_threads_variable():
    """OMP_NUM_THREADS rewritten as `requested_threads` takes it (removed where it is not a count), in this process's
    environment, before torch loads: OpenMP reads it once, as it loads, for the teams of every thread the process
    starts (a Python thread's are not torch's count: tens of thousands crash OpenMP) and of its children, and warns
    of an invalid value itself. The commands call this first."""
    value, count = os.environ.get(THREADS_VARIABLE), requested_threads()
    if count is None:
        os.environ.pop(THREADS_VARIABLE, None)
    elif count < int(value.split(",")[0]):
        os.environ[THREADS_VARIABLE] = str(count)
