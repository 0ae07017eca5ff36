"""Clean Python processes for the tests, forked from one that has imported torch and transformers already.

Most tests that start a command only need a clean process: its own `sys.modules`, globals, signals, working folder and
standard streams. A fresh `python` spends most of its start importing torch and transformers; the tests start over a
hundred. `run(argv, env, ...)` and `popen(argv, env, ...)` stand for subprocess.run and subprocess.Popen: they run
the same program in a child forked from a warm server, a server per environment and interpreter flags (started on
first use, with exactly that environment, so whatever torch, transformers or huggingface_hub read from it at import is
the same). `command_line(argv, env)` is the command line they run, for a shell that runs it with `env`. Everything
else stays as subprocess gives it: the environment, the working folder and the standard streams of the process
subprocess starts (a small launcher) are passed to the child; signals sent to the launcher go to the child; the
launcher exits as the child did (its exit status, or the same signal).

What differs from a fresh process, and why a test may still need one: torch and transformers (and what they import)
are already in `sys.modules` when the program starts, the child is not a child of the test, and a SIGKILL of the
launcher reaches the child only after a moment. A test that checks which modules a command imports, or the order of
imports, or kills a command, or sets resource limits in it, starts a real fresh process (the rule in
docs/code-layout.md). Where the launcher's environment is not the server's, it runs the fresh process itself.
"""

import atexit
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# What a command of this package imports at its start, that the server imports once.
PRELOAD = ("torch", "transformers.modeling_utils", "transformers.trainer", "h5py", "safetensors.torch")
FLAGS = ("-I", "-B")  # the interpreter flags a command line may start with: its server starts with them
# Read by no import, and set by pytest for each test or by a shell for each command: a server serves every value, its
# child takes the launcher's.
PER_COMMAND = ("PYTEST_CURRENT_TEST", "PWD", "OLDPWD", "SHLVL", "_")
MAX_SERVERS = 5  # per test process: an idle server holds a few hundred MB

# The launcher (run as `python -I -S -c LAUNCHER SOCKET ARGV...`, so that it imports nothing): hands its environment,
# working folder and standard streams to the server, forwards signals, exits as the child did.
LAUNCHER = r"""
import json, os, signal, socket, sys
path, argv = sys.argv[1], sys.argv[2:]
streams = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        streams.append(fd)
    except OSError:
        pass
request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "streams": streams}).encode()
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.connect(path)
socket.send_fds(server, [b"%d\n" % len(request)], streams)
server.sendall(request)
answers = server.makefile("rb")
first = answers.readline().decode().strip()
if not first.isdigit():  # refused (another environment): the fresh process itself
    os.execv(argv[0], argv)
pid = int(first)
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(number, lambda number, frame: os.kill(pid, number))
status = int(answers.readline() or -1)
if status < 0:
    sys.exit("warm python: the server ended before the command")
if os.WIFSIGNALED(status):
    number = os.WTERMSIG(status)
    if number not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
sys.exit(os.WEXITSTATUS(status))
"""

# The server (run as `python [-I] -c SERVER SOCKET MODULE...` in the environment its children get): imports MODULE...,
# then forks a child per request. The child returns from serve() and runs the program as the main module; the
# interpreter's own end (atexit, flushing, the exit status of an exception) follows as in a fresh process.
SERVER = r"""
import gc, json, os, selectors, signal, socket, sys, threading
path, modules = sys.argv[1], sys.argv[2:]
def without_per_command(env):
    return {k: v for k, v in env.items() if k not in PER_COMMAND}


environment = without_per_command(os.environ)  # as it started: an import may add to it (torch's inductor cache folder)
for module in modules:
    __import__(module)
# Native pools (OpenBLAS's, pyarrow's allocator) hand over at fork, as for torch's DataLoader workers; a Python
# thread would not survive it.
if threading.active_count() != 1:
    sys.exit(f"warm python: importing {modules} started a Python thread, which a forked child would lack")
# What the imports made is never collected (as in a fresh process, where it lives until the end), so neither the
# children's garbage collections nor their exit walk it (gc.freeze's purpose, for servers that fork).
gc.freeze()


def read_request(connection):
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    header, _, data = data.partition(b"\n")
    while len(data) < int(header):
        more = connection.recv(1 << 20)
        if not more:
            raise EOFError
        data += more
    return json.loads(data), fds


def serve():
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    signal.set_wakeup_fd(wake_write)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)  # end of file: the test process is done with this server
    selector.register(wake_read, selectors.EVENT_READ)
    print("ready", flush=True)
    launchers, closing = {}, False
    while not (closing and not launchers):
        for key, _ in selector.select():
            if key.fileobj is sys.stdin:
                selector.unregister(sys.stdin)
                selector.unregister(listener)
                closing = True
            elif key.fileobj == wake_read:
                os.read(wake_read, 4096)
            elif key.fileobj is listener:
                connection, _ = listener.accept()
                request, fds = read_request(connection)
                if without_per_command(request["env"]) != environment:
                    connection.sendall(b"refused\n")
                    connection.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = os.fork()
                if pid == 0:
                    for launcher in [connection, *launchers.values(), listener]:
                        launcher.close()
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wake_read)
                    os.close(wake_write)
                    return request, fds
                for fd in fds:
                    os.close(fd)
                connection.sendall(b"%d\n" % pid)
                launchers[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
            else:  # a launcher went away before its child ended (killed): so does the child
                os.kill(key.data, signal.SIGKILL)
                selector.unregister(key.fileobj)
                key.fileobj.close()
        while launchers:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection = launchers.pop(pid)
            if connection.fileno() != -1:
                selector.unregister(connection)
                try:
                    connection.sendall(b"%d\n" % status)
                except OSError:
                    pass
                connection.close()
    return None, None


request, fds = serve()
if request is None:
    sys.exit(0)
# The child: the launcher's standard streams (one it had closed stays closed) and folder; its environment is the
# server's (the same at the start, and changed since as the imports change it in a fresh process) with the
# launcher's PER_COMMAND variables.
for target in (0, 1, 2):
    if target in request["streams"]:
        os.dup2(fds[request["streams"].index(target)], target)
    else:
        os.close(target)
        name = ("stdin", "stdout", "stderr")[target]
        setattr(sys, name, None)
        setattr(sys, f"__{name}__", None)
for fd in fds:
    os.close(fd)
os.chdir(request["cwd"])
if "multiprocessing.process" in sys.modules:  # the folder it started in, which a spawned process's path starts with
    sys.modules["multiprocessing.process"].ORIGINAL_DIR = os.getcwd()
for name in PER_COMMAND:
    os.environ.pop(name, None)
    if name in request["env"]:
        os.environ[name] = request["env"][name]
if "numpy" in sys.modules:  # its global generator was seeded once, in the server: each child gets its own seed
    sys.modules["numpy"].random.seed()
import runpy, types
argv = request["argv"][1:]
while argv[0] in FLAGS:  # the server's own (after the interpreter)
    argv = argv[1:]
main = types.ModuleType("__main__")
sys.modules["__main__"] = main
if argv[0] == "-m":
    if not sys.flags.safe_path:
        sys.path[0] = os.getcwd()
    sys.argv = ["-m", *argv[2:]]
    runpy._run_module_as_main(argv[1])
elif argv[0] == "-c":
    sys.argv = ["-c", *argv[2:]]
    exec(compile(argv[1], "<string>", "exec"), main.__dict__)
else:
    if not sys.flags.safe_path:
        sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
"""


class _Servers:
    """This test process's servers, by (interpreter flags, environment); the oldest is closed past MAX_SERVERS."""

    def __init__(self):
        self.folder, self.servers, self.started = None, {}, 0

    def socket_for(self, flags, env):
        key = (flags, tuple(sorted((k, v) for k, v in env.items() if k not in PER_COMMAND)))
        if key in self.servers:
            self.servers[key] = self.servers.pop(key)  # the most recently used last
            return self.servers[key][1]
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="warm-python-"))
            atexit.register(self.close)
        while len(self.servers) >= MAX_SERVERS:
            self._close(next(iter(self.servers)))
        self.started += 1
        path = self.folder / f"{self.started}.socket"
        work = self.folder / f"{path.stem}.folder"  # the server's folder: empty, so that nothing in it shadows a module
        work.mkdir()
        code = f"FLAGS, PER_COMMAND = {FLAGS!r}, {PER_COMMAND!r}\n{SERVER}"
        server = subprocess.Popen([sys.executable, *flags, "-c", code, str(path), *PRELOAD], env=env, cwd=work,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        ready = server.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"warm python: the server did not start (exit status {server.wait()})")
        self.servers[key] = (server, str(path))
        return str(path)

    def _close(self, key):
        server, _ = self.servers.pop(key)
        server.stdin.close()  # it ends once its running children have

    def close(self):
        servers = [server for server, _ in self.servers.values()]
        for key in list(self.servers):
            self._close(key)
        for server in servers:
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


_servers = _Servers()


def command_line(argv, env=None):
    """For subprocess with `env` (None: this process's): the command line that runs `argv` in a warm child. `argv`:
    `[sys.executable, FLAG..., -m MODULE | -c CODE | SCRIPT, ARGS...]` (FLAG one of FLAGS), or a console script of
    this environment and its arguments."""
    argv, env = [str(a) for a in argv], dict(os.environ) if env is None else env
    if argv[0] != sys.executable:  # a console script: its interpreter runs it as a script
        shebang = Path(argv[0]).read_text(encoding="utf-8").splitlines()[0]
        if Path(shebang.removeprefix("#!")).resolve() != Path(sys.executable).resolve():
            raise ValueError(f"warm python: {argv[0]} is not a script of this interpreter ({shebang})")
        argv = [sys.executable, *argv]
    flags = tuple(itertools.takewhile(lambda word: word in FLAGS, argv[1:]))
    program = argv[1 + len(flags):]
    if not program or (program[0].startswith("-") and program[0] not in ("-m", "-c")):
        raise ValueError(f"warm python: only `python [{' | '.join(FLAGS)}]... (-m MODULE | -c CODE | SCRIPT) ...` is "
                         f"supported: {argv}")
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, _servers.socket_for(flags, env), *argv]


def run(argv, env=None, **options):
    """subprocess.run(argv, env=env, **options), the program run in a warm child: the environment given once, so that
    the launcher's is the one its server was started with."""
    return subprocess.run(command_line(argv, env), env=env, **options)


def popen(argv, env=None, **options):
    """subprocess.Popen(argv, env=env, **options), the program run in a warm child (as `run`)."""
    return subprocess.Popen(command_line(argv, env), env=env, **options)
