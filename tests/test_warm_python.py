"""tests/warm_python.py against the fresh process it stands for: the same program sees the same arguments, path,
folder, environment, flags and streams, and ends with the same status; what it documents as different (the preloaded
modules) is all that differs."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from conftest import command_env
from warm_python import command_line as warm

pytestmark = pytest.mark.slow

PROBE = """
import json, os, sys
import multiprocessing.process
print(json.dumps({"argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "env": dict(os.environ),
                  "original_dir": multiprocessing.process.ORIGINAL_DIR,
                  "flags": [sys.flags.isolated, sys.flags.safe_path, sys.flags.dont_write_bytecode],
                  "name": __name__, "streams": [s is None for s in (sys.stdin, sys.stdout, sys.stderr)],
                  "torch": "torch" in sys.modules}))
sys.exit(int(sys.argv[-1]))
"""


def both(argv, env, cwd, closed=()):
    """(fresh, warm) probe results of `argv` run both ways, with the standard streams `closed` closed; each
    {"status", "seen", "stderr"}."""
    results = []
    for line in (argv, warm(argv, env)):
        done = subprocess.run(line, env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: [os.close(fd) for fd in closed])
        seen = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else None
        results.append({"status": done.returncode, "seen": seen, "stderr": done.stderr})
    return results


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory):
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path_factory.mktemp("home"))}


@pytest.mark.parametrize("flags", [(), ("-I", "-B")], ids=["plain", "isolated-no-bytecode"])
@pytest.mark.parametrize("form", ["-c", "-m", "script"])
def test_a_warm_child_sees_what_a_fresh_process_sees(tmp_path, flags, form, isolated_env):
    (tmp_path / "probe.py").write_text(PROBE)
    program = {"-c": ["-c", PROBE], "-m": ["-m", "probe"], "script": [str(tmp_path / "probe.py")]}[form]
    env = isolated_env if flags else command_env()
    fresh, forked = both([sys.executable, *flags, *program, "a b", "7"], env, tmp_path)
    if flags and form == "-m":  # -I: the current folder is not on the path
        assert fresh["status"] == forked["status"] == 1 and "No module named probe" in forked["stderr"], forked
        return
    assert fresh["status"] == forked["status"] == 7, forked["stderr"][-2000:]
    assert fresh["seen"].pop("torch") is False and forked["seen"].pop("torch") is True  # the one documented difference
    for seen in (fresh["seen"], forked["seen"]):
        seen["env"].pop("PYTEST_CURRENT_TEST", None)
        seen["env"].pop("TORCHINDUCTOR_CACHE_DIR", None)  # set by an import of the warm server's
    assert forked["seen"] == fresh["seen"]


def test_closed_streams_stay_closed(tmp_path):
    fresh, forked = both([sys.executable, "-c", PROBE, "0"], command_env(), tmp_path, closed=(0, 2))
    assert fresh["seen"]["streams"] == forked["seen"]["streams"] == [True, False, True]


def test_exit_statuses_and_signals_are_the_fresh_processes(tmp_path):
    env = command_env()
    for code, status in [("raise ValueError('no')", 1), ("import sys; sys.exit('a message')", 1),
                         ("import os; os.kill(os.getpid(), 9)", -9)]:
        forked = subprocess.run(warm([sys.executable, "-c", code], env), env=env, capture_output=True, text=True)
        fresh = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert forked.returncode == fresh.returncode == status, forked.stderr
        assert forked.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:]
    waiting = "import time; print('waiting', flush=True); time.sleep(60)"
    for number, status in [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM)]:
        process = subprocess.Popen(warm([sys.executable, "-c", waiting], env), env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "waiting\n"
        process.send_signal(number)  # to the launcher: forwarded to the child
        assert process.wait(timeout=30) == status
        process.stdout.close(), process.stderr.close()


def test_a_killed_launcher_takes_its_child_with_it(tmp_path):
    env = command_env()
    process = subprocess.Popen(warm([sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); "
                                     "time.sleep(60)"], env), env=env, stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    process.kill()
    process.wait()
    process.stdout.close()
    deadline = time.monotonic() + 10
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child)


def running(pid):
    """Whether `pid` runs (a zombie, not yet reaped by the server, does not)."""
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_another_environment_gets_a_fresh_process(tmp_path):
    env = command_env()
    line = warm([sys.executable, "-c", "import sys; print('torch' in sys.modules)"], env)
    assert subprocess.run(line, env=env, capture_output=True, text=True).stdout == "True\n"
    assert subprocess.run(line, env=dict(env, OTHER="1"), capture_output=True, text=True).stdout == "False\n"


def test_a_shell_between_keeps_the_child_warm(tmp_path):
    """A shell sets PWD, SHLVL and _ for the command it runs: the child sees the shell's values, as a fresh process
    would, and still comes from the server of the environment given."""
    env = command_env()
    code = "import os, sys; print('torch' in sys.modules, os.environ['PWD'], os.environ['SHLVL'])"
    seen = [subprocess.run(["bash", "-c", f"cd {shlex.quote(str(tmp_path))} && {shlex.join(line)}"], env=env,
                           capture_output=True, text=True).stdout.split()
            for line in ([sys.executable, "-c", code], warm([sys.executable, "-c", code], env))]
    assert seen[0][0] == "False" and seen[1][0] == "True" and seen[0][1] == str(tmp_path)
    assert seen[1][1:] == seen[0][1:]  # the folder, and the shell's level (one more than that of the shell it is in)
