"""Where a submitted notebook runs when it is graded: the strongest isolation this machine allows.

:mod:`servingmath.assignments` runs each submission with :func:`run_notebook`, through
:mod:`servingmath._runner`, in one of these **levels** (the grader prints which one, and a
warning for the weaker ones):

``bwrap``
    bubblewrap: fresh user (when not root), pid, network, IPC and UTS namespaces; a root file
    system holding only the system folders, the Python installation and the library, read-only;
    a private, size-limited ``/tmp`` where the notebook runs; no network at all. As root, the
    notebook runs under an unused uid of its own, without capabilities.
``unshare``
    util-linux ``unshare``: the same namespaces; the whole file system read-only, with the
    teacher's folders (template, roster, submissions, output, key, home, the working folder)
    hidden under empty mounts, and a private ``/tmp``. As root, an unused uid; otherwise the
    namespace's root without any capability.
``uid``
    root without namespaces: an unused uid of its own (so it can neither write the teacher's
    files nor signal the grader), but the network stays on and world-readable files readable.
``none``
    nothing but resource limits and its own process group: the notebook can do what your
    account can do. Only for notebooks you trust.

Every level sets resource limits (:class:`Limits`: CPU seconds, address space, file size,
processes) and a wall-clock limit, and kills everything the notebook started before the
result is used (the whole pid namespace, or every process of the sandbox's uid).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Limits", "Isolation", "RunOutcome", "LEVELS", "detect_isolation", "run_notebook", "stop_all"]

LEVELS = ("bwrap", "unshare", "uid", "none")
WORKDIR = "/tmp/submission"
#: What the grader keeps of a run's output (the runner's JSON lines) and of its error output.
MAX_STDOUT = 16 * 2**20
MAX_STDERR = 64 * 2**10


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's run (every process of it).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    cell_seconds: int = 60
    wall_seconds: int = 600
    cpu_seconds: int = 600
    memory_bytes: int = 4 * 2**30
    file_bytes: int = 64 * 2**20
    processes: int = 256
    tmp_bytes: int = 512 * 2**20

    def describe(self) -> str:
        return (f"{self.cell_seconds} s a cell, {self.wall_seconds} s in all, memory {self.memory_bytes / 2**30:g} GiB, "
                f"files {self.file_bytes / 2**20:g} MiB, {self.processes} processes")


@dataclass
class Isolation:
    """The isolation level chosen, what it gives, and a warning when it is not the strongest.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    level: str
    root: bool
    uid: int | None = None
    description: str = ""
    warning: str = ""
    tried: dict = field(default_factory=dict)

    def banner(self) -> str:
        line = f"isolation: {self.level} ({self.description})"
        return line + (f"\nWARNING: {self.warning}" if self.warning else "")


@dataclass
class RunOutcome:
    """What came back from one run: the runner's records, how it ended.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    records: list
    status: dict | None
    returncode: int | None
    killed: str = ""         # "" | "wall clock" | "output too large"
    stderr_tail: str = ""


# ---------------------------------------------------------------- helpers
def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _python_paths() -> list[str]:
    """Folders the runner and the kernel need to read: the Python installation, the environment,
    its site-packages and the library's own folder."""
    import servingmath

    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(servingmath.__file__))}
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if prefix and os.path.isdir(prefix):
        paths.add(os.path.abspath(prefix))
    resolved = {os.path.realpath(p) for p in paths if os.path.exists(p)} | {p for p in paths if os.path.exists(p)}
    return _outermost(resolved)


def _outermost(paths) -> list[str]:
    out = []
    for path in sorted(set(paths), key=len):
        if not any(path == p or path.startswith(p.rstrip("/") + "/") for p in out):
            out.append(path)
    return out


_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


def _sandbox_uid() -> int:
    """An unused uid for this grading run (no process has it now)."""
    base = 2_100_000_000 + (os.getpid() % 50_000) * 10
    for uid in range(base, base + 10):
        if not _uid_processes(uid):
            return uid
    return base


def _uid_processes(uid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(entry.path).st_uid == uid:
                        found.append(int(entry.name))
    return found


def _user_threads(uid: int) -> int:
    count = 0
    for pid in _uid_processes(uid):
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("Threads:"):
                        count += int(line.split()[1])
    return count


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid`` (a process of that uid calls kill(-1), which reaches exactly them)."""
    for _ in range(20):
        if not _uid_processes(uid):
            return
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.05)


def _kill_marked(token: str) -> None:
    """Without a uid or namespace of its own: kill the processes whose environment holds ``token``."""
    needle = f"SERVINGMATH_SANDBOX={token}".encode()
    for _ in range(5):
        found = []
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if entry.name.isdigit() and int(entry.name) != os.getpid():
                    with contextlib.suppress(OSError):
                        with open(f"/proc/{entry.name}/environ", "rb") as handle:
                            if needle in handle.read(1 << 20).split(b"\0"):
                                found.append(int(entry.name))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _preexec(limits: Limits, processes: int, parent_death: bool):
    import ctypes
    import resource

    libc = ctypes.CDLL(None)      # loaded here: the child, forked from a threaded grader, only calls

    def apply():  # runs in the child between fork and exec
        os.setsid()
        if parent_death:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _environment(workdir: str, token: str) -> dict:
    env = {
        "PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": f"{workdir}/home", "TMPDIR": f"{workdir}/.tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "IPYTHONDIR": f"{workdir}/.ipython", "MPLCONFIGDIR": f"{workdir}/.mpl",
        "JUPYTER_RUNTIME_DIR": f"{workdir}/.runtime", "JUPYTER_CONFIG_DIR": f"{workdir}/.jupyter",
        "JUPYTER_DATA_DIR": f"{workdir}/.jupyter", "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg",
        "SERVINGMATH_CAPTURE": "1", "SERVINGMATH_SANDBOX": token, "VIRTUAL_ENV": sys.prefix,
    }
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if prefix and os.path.isdir(prefix):
        env["PYTHONPYCACHEPREFIX"] = os.path.abspath(prefix)   # read-only in the sandbox: a faster start
    return env


# ---------------------------------------------------------------- commands per level
def _runner_argv(config: dict) -> list[str]:
    return [sys.executable, "-m", "servingmath._runner", json.dumps(config)]


def _bwrap_command(config, env, limits, root) -> list[str]:
    cmd = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
           "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not root:
        cmd.append("--unshare-user")
    for path in _SYSTEM:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    made = set()
    for path in _python_paths():
        if not any(path == s or path.startswith(s + "/") for s in _SYSTEM):
            parts = Path(path).parts
            for i in range(2, len(parts)):   # folders on the way, enterable by the sandbox's uid
                ancestor = str(Path(*parts[:i]))
                if ancestor not in made:
                    made.add(ancestor)
                    cmd += ["--perms", "0755", "--dir", ancestor]
            cmd += ["--ro-bind", path, path]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_bytes),
            "--tmpfs", "/tmp", "--perms", "0777", "--dir", WORKDIR, "--chdir", "/tmp", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if root:
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return cmd + ["--"] + _runner_argv(config)


def _unshare_command(config, root) -> list[str]:
    cmd = [shutil.which("unshare") or "unshare", "--fork", "--pid", "--mount", "--net", "--ipc", "--uts",
           "--kill-child"]
    if not root:
        cmd += ["--user", "--map-root-user"]
    return cmd + ["--"] + _runner_argv(config)


def _hidden_paths(extra) -> list[str]:
    """Folders the unshare level hides: the teacher's (given), home, working folder, temporary folders,
    and each folder on the way to the Python files that an unprivileged uid could not enter."""
    hide = {os.path.realpath(p) for p in extra if p}
    hide |= {os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.getcwd()), "/root", "/home",
             "/var/tmp", "/dev/shm", "/run", "/mnt", "/media", "/srv", "/var/mail", "/var/spool"}
    hide.add(os.path.realpath(tempfile.gettempdir()))
    for path in _python_paths():
        parts = Path(path).parts
        if len(parts) > 2 and not any(path.startswith(s + "/") for s in _SYSTEM):
            hide.add(str(Path(*parts[:2])))      # /work: only the Python files inside stay visible
        for i in range(2, len(parts)):
            ancestor = str(Path(*parts[:i]))
            with contextlib.suppress(OSError):
                if not os.stat(ancestor).st_mode & 0o001:
                    hide.add(ancestor)
    system = {os.path.realpath(p) for p in _SYSTEM} | {"/", "/proc", "/dev", "/sys", "/tmp"}
    return sorted(p for p in hide if p not in system and os.path.isdir(p))


# ---------------------------------------------------------------- running
_RUNNING: set = set()
_RUNNING_LOCK = threading.Lock()


def stop_all() -> None:
    """Kill every sandbox run in progress (the grader was interrupted).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def _run(argv, *, config, env, limits, level, root, uid, token, stdin_bytes, cwd) -> RunOutcome:
    processes = limits.processes
    if not root or uid is None:
        processes = limits.processes + _user_threads(os.getuid())
    parent_death = level in ("uid", "none", "unshare")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, close_fds=True,
                            preexec_fn=_preexec(limits, processes, parent_death))
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    outcome = RunOutcome(records=[], status=None, returncode=None)
    out_buf, err_buf, out_size = bytearray(), bytearray(), 0
    deadline = time.monotonic() + limits.wall_seconds
    try:
        try:
            proc.stdin.write(stdin_bytes)
        except (BrokenPipeError, OSError):
            pass
        with contextlib.suppress(OSError):
            proc.stdin.close()
        streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
        exited_at = None
        while streams:
            now = time.monotonic()
            if now > deadline:
                outcome.killed = "wall clock"
                break
            if proc.poll() is not None:
                exited_at = exited_at or now
                if now - exited_at > 2.0:   # something it started still holds the pipes open
                    break
            ready, _, _ = select.select(list(streams), [], [], 0.2)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    del streams[fd]
                    continue
                if streams[fd] == "out":
                    out_size += len(chunk)
                    if out_size <= MAX_STDOUT:
                        out_buf += chunk
                    else:
                        outcome.killed = outcome.killed or "output too large"
                else:
                    err_buf = (err_buf + chunk)[-MAX_STDERR:]
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
        if uid is not None:
            _kill_uid(uid)
        if level == "none" or (level == "uid" and uid is None):
            _kill_marked(token)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    outcome.returncode = proc.returncode
    outcome.stderr_tail = err_buf.decode("utf-8", "replace")[-2000:]
    for line in bytes(out_buf).split(b"\n"):
        if not line.strip() or len(line) > 400_000:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            if record.get("t") == "status" and outcome.status is None:
                outcome.status = record
            elif record.get("t") in ("capture", "probe"):
                outcome.records.append(record)
    return outcome


def _prepare(level: str, root: bool, uid, hide, limits: Limits, probe: bool):
    """The command line, runner configuration, environment and scratch folder of one run."""
    token = os.urandom(8).hex()
    scratch = None
    config = {"cell_timeout": limits.cell_seconds, "probe": probe}
    if level in ("bwrap", "unshare"):
        workdir = WORKDIR
        cwd = "/"
    else:
        scratch = tempfile.mkdtemp(prefix="servingmath-run-")
        os.chmod(scratch, 0o700)
        workdir = os.path.join(scratch, "submission")
        os.mkdir(workdir)
        if uid is not None:
            os.chown(scratch, uid, uid)
            os.chown(workdir, uid, uid)
        cwd = workdir
    config["workdir"] = workdir
    env = _environment(workdir, token)
    if root and uid is not None and level != "none":
        config.update(uid=uid, gid=uid)
    if level == "unshare":
        config["setup"] = {"keep": _python_paths(), "hide": _hidden_paths(hide), "tmp_bytes": limits.tmp_bytes}
        if not root:
            config["drop_capabilities"] = True
    if level in ("uid", "none", "unshare"):
        config["parent_death"] = True
    if level == "bwrap":
        argv = _bwrap_command(config, env, limits, root)
    elif level == "unshare":
        argv = _unshare_command(config, root)
    else:
        argv = _runner_argv(config)
    return argv, config, env, token, scratch, cwd


def run_notebook(notebook_bytes: bytes, isolation: Isolation, limits: Limits, hide=(), probe=False) -> RunOutcome:
    """Run one notebook (its JSON text) at ``isolation``'s level; return what the runner reported.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Nothing the notebook does outlives this call: when it returns, every process it started has
    been killed and its scratch folder removed.
    """
    uid = isolation.uid
    argv, config, env, token, scratch, cwd = _prepare(isolation.level, isolation.root, uid, hide, limits, probe)
    try:
        return _run(argv, config=config, env=env, limits=limits, level=isolation.level, root=isolation.root,
                    uid=uid, token=token, stdin_bytes=notebook_bytes, cwd=cwd)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


_DESCRIPTIONS = {
    "bwrap": "bubblewrap: own pid, network, IPC and mount namespaces; read-only system and Python, private /tmp; "
             "the teacher's files out of sight; no network",
    "unshare": "unshare: own pid, network, IPC and mount namespaces; whole file system read-only, the teacher's "
               "folders hidden, private /tmp; no network",
    "uid": "its own unprivileged uid and resource limits; no namespaces",
    "none": "resource limits and its own process group only",
}
_WARNINGS = {
    "unshare": "bubblewrap (bwrap) is not installed: isolation uses unshare instead (install bubblewrap for the "
               "strongest isolation).",
    "uid": "no namespace sandbox works here (install bubblewrap, or run as a user allowed to create user "
           "namespaces): submissions run under their own uid, so they cannot write your files or signal the "
           "grader, but they can use the network and read every world-readable file.",
    "none": "no isolation is possible here: submissions run as YOUR account ({who}) with only resource limits, "
            "so a malicious notebook can read and change your files, use the network and outlive the grader. "
            "Install bubblewrap (apt-get install bubblewrap), or grade inside a container or a throwaway virtual "
            "machine.",
}


_DETECTED: dict = {}


def detect_isolation(preferred: str = "auto", hide=(), limits: Limits | None = None) -> Isolation:
    """The strongest level that works here (each tried with a short probe run), or ``preferred``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``preferred`` is ``"auto"`` or one of :data:`LEVELS`; a level that does not work raises
    ``RuntimeError`` naming why. A level found to work is remembered for the rest of the process.
    """
    if preferred != "auto" and preferred not in LEVELS:
        raise ValueError(f"isolation must be 'auto' or one of {', '.join(LEVELS)}, got {preferred!r}")
    root = _is_root()
    uid = _sandbox_uid() if root else None
    limits = limits or Limits()
    probe_limits = Limits(cell_seconds=30, wall_seconds=60, cpu_seconds=60, memory_bytes=limits.memory_bytes,
                          file_bytes=limits.file_bytes, processes=limits.processes, tmp_bytes=64 * 2**20)
    candidates = LEVELS if preferred == "auto" else (preferred,)
    cache_key = (preferred, root, limits.memory_bytes)   # the folders hidden do not decide whether a level works
    if cache_key in _DETECTED:
        cached = _DETECTED[cache_key]
        return Isolation(level=cached.level, root=cached.root, uid=uid if cached.uid is not None else None,
                         description=cached.description.replace(f"uid {cached.uid}", f"uid {uid}"),
                         warning=cached.warning, tried=dict(cached.tried))
    tried = {}
    for level in candidates:
        if level == "bwrap" and not shutil.which("bwrap"):
            tried[level] = "bwrap is not installed"
            continue
        if level == "unshare" and not shutil.which("unshare"):
            tried[level] = "unshare is not installed"
            continue
        if level == "uid" and not root:
            tried[level] = "needs root to run submissions under another uid"
            continue
        isolation = Isolation(level=level, root=root, uid=uid if level != "none" else None)
        if level == "none":
            ok, why = True, ""
        else:
            outcome = run_notebook(b"", isolation, probe_limits, hide=hide, probe=True)
            probes = [r for r in outcome.records if r.get("t") == "probe"]
            ok = bool(probes) and (uid is None or probes[0].get("uid") == uid)
            why = "" if ok else (outcome.stderr_tail.strip().splitlines() or [f"exit status {outcome.returncode}"])[-1][:200]
        if ok:
            isolation.description = _DESCRIPTIONS[level] + (f"; runs as uid {uid}" if isolation.uid is not None
                                                            else "")
            warning = _WARNINGS.get(level, "")
            if level == "bwrap" and not root:
                warning = ""
            if level == "none":
                who = "root" if root else f"uid {os.getuid()}"
                warning = warning.format(who=who) + (" As root, the process limit does not apply either."
                                                     if root else "")
            if level == "unshare" and "bwrap" in tried and "not installed" not in tried["bwrap"]:
                warning = "bubblewrap (bwrap) is installed but does not work here: isolation uses unshare instead."
            if level != candidates[0] and tried:
                warning = (warning + " Not available: " + "; ".join(f"{k}: {v}" for k, v in tried.items()) + ".").strip()
            isolation.warning = warning
            isolation.tried = tried
            _DETECTED[cache_key] = isolation
            return isolation
        tried[level] = why
    raise RuntimeError("isolation " + preferred + " does not work here: "
                       + "; ".join(f"{k}: {v}" for k, v in tried.items()))
