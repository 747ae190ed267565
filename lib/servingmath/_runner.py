"""Run one submitted notebook inside the grading sandbox (``python -m servingmath._runner CONFIG``).

Started by :mod:`servingmath.sandbox` for :mod:`servingmath.assignments`; not for students.
It reads the notebook from stdin, (optionally) finishes building its namespace sandbox and
drops its privileges, runs every cell in a fresh kernel with nbclient, and writes JSON lines to
stdout, the grader's pipe:

* ``{"t": "capture", "cell": i, "q": id, "a": record}`` for each answer a ``check()`` call
  reported (the kernel prints :data:`servingmath.checks.CAPTURE_MARK` lines, which arrive here
  as the cell's output; nothing else the notebook prints is kept);
* ``{"t": "status", ...}`` once, at the end: how the run ended, the cells that raised (name and
  first words of the message) and the cells that ran past the time limit.

Everything here is untrusted by the grader: it reads these lines with size limits and
re-checks every answer itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MAX_NOTEBOOK = 32 * 2**20
MAX_RECORD = 200_000


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option, arg2=0):
    return _libc().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
                         ctypes.c_ulong(0))


PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
PR_CAPBSET_DROP, PR_SET_SECUREBITS = 24, 28


# ---------------------------------------------------------------- the namespace sandbox (unshare level)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
SYS_MOUNT_SETATTR = 442


def _mount(source, target, fstype, flags, data=None):
    libc = _libc()
    result = libc.mount(None if source is None else source.encode(), target.encode(),
                        None if fstype is None else fstype.encode(), ctypes.c_ulong(flags),
                        None if data is None else data.encode())
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {source or fstype} on {target}: {os.strerror(error)}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _set_readonly(path: str, readonly: bool, recursive: bool) -> None:
    attr = _MountAttr(MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY, 0, 0)
    libc = _libc()
    result = libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                          ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                          ctypes.c_size_t(ctypes.sizeof(attr)))
    if result == 0:
        return
    # older kernels: remount each mount point on its own
    if not readonly or not recursive:
        _mount(None, path, None, MS_REMOUNT | MS_BIND | (MS_RDONLY if readonly else 0))
        return
    with open("/proc/self/mountinfo") as handle:
        points = sorted({line.split()[4] for line in handle}, key=len)
    for point in points:
        if point == path or point.startswith(path.rstrip("/") + "/"):
            try:
                _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            except OSError:
                pass


def _loopback_up() -> None:
    """Bring up ``lo`` in a fresh network namespace (the kernel talks to its runner over it)."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))


def _setup_namespace(setup: dict) -> None:
    """Inside fresh mount, pid and net namespaces (``unshare``): hide the teacher's folders,
    make everything read-only but a private ``/tmp``, and mount a ``/proc`` of this pid namespace."""
    _loopback_up()
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = {path: os.open(path, os.O_PATH) for path in setup["keep"] if os.path.exists(path)}
    tmp_size = int(setup["tmp_bytes"])
    hide = sorted(set(setup["hide"]), key=len)
    for path in hide:
        if not os.path.isdir(path) or any(path.startswith(h.rstrip("/") + "/") for h in hide if h != path):
            continue   # a file's folder is hidden instead; a folder inside a hidden one is hidden already
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        for kept, fd in keep.items():
            if kept.startswith(path.rstrip("/") + "/"):
                os.makedirs(kept, exist_ok=True)
                _mount(f"/proc/self/fd/{fd}", kept, None, MS_BIND | MS_REC)
    _set_readonly("/", True, True)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    # the Python environment may itself live under /tmp (a clone in a temporary folder): bind it back, read-only
    for kept, fd in keep.items():
        if kept.startswith("/tmp/"):
            os.makedirs(kept, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", kept, None, MS_BIND | MS_REC)
            _set_readonly(kept, True, True)
    for fd in keep.values():
        os.close(fd)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:   # a user namespace may not mount proc: hide the host's instead
        _mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0555")


def _drop_capabilities() -> None:
    """Root of a user namespace: give up every capability for good (the namespace's root stays
    the teacher's own account outside, but can no longer undo the mounts)."""
    SECBIT_NOROOT, SECBIT_NOROOT_LOCKED, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_SETUID_FIXUP_LOCKED = 1, 2, 4, 8
    SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE, SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 32, 64, 128
    _prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP
           | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE
           | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)
    for cap in range(64):
        _prctl(PR_CAPBSET_DROP, cap)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    if _libc().capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _drop_to(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not change the user")


# ---------------------------------------------------------------- running the notebook
def _emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _run(nb, config: dict) -> dict:
    import subprocess

    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from servingmath.checks import CAPTURE_MARK

    workdir = config["workdir"]
    errors, timed_out, pending = [], [], {}

    class Runner(NotebookClient):
        current = -1

        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            self.current = cell_index
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)

        async def _async_handle_timeout(self, timeout, cell=None):
            if self.current in timed_out:   # interrupted once and still running: stop the kernel
                raise CellTimeoutError(f"cell {self.current} ignored the interrupt")
            timed_out.append(self.current)
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            kind, content = msg["msg_type"], msg.get("content", {})
            if kind == "stream" and content.get("name") == "stdout":
                text = pending.pop(cell_index, "") + str(content.get("text", ""))
                *lines, rest = text.split("\n")
                if len(rest) < MAX_RECORD and CAPTURE_MARK in rest:
                    pending[cell_index] = rest[rest.index(CAPTURE_MARK):]
                for line in lines:
                    if CAPTURE_MARK in line:
                        payload = line[line.index(CAPTURE_MARK) + len(CAPTURE_MARK):]
                        if len(payload) > MAX_RECORD:
                            continue
                        try:
                            record = json.loads(payload)
                        except ValueError:
                            continue
                        if isinstance(record, dict):
                            _emit({"t": "capture", "cell": cell_index, "q": record.get("q"), "a": record.get("a")})
            elif kind == "error" and len(errors) < 200:
                errors.append({"cell": cell_index, "ename": str(content.get("ename", ""))[:80],
                               "evalue": str(content.get("evalue", ""))[:200]})
            return None

    runtime = os.path.join(workdir, ".runtime")
    os.makedirs(runtime, exist_ok=True)
    # the kernel talks to this runner over tcp on the loopback of the sandbox's own network
    client = Runner(nb, timeout=int(config["cell_timeout"]), allow_errors=True, interrupt_on_timeout=True,
                    startup_timeout=int(config.get("startup_timeout", 120)), kernel_name="python3",
                    resources={"metadata": {"path": workdir}}, record_timing=False,
                    shutdown_kernel="immediate")
    state = "done"
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    except CellTimeoutError:
        state = "timed out"
    except DeadKernelError:
        state = "kernel died"
    except Exception as exc:  # noqa: BLE001 - reported as data
        state = f"runner error: {type(exc).__name__}: {str(exc)[:200]}"
    return {"t": "status", "state": state, "errors": errors, "timed_out": timed_out,
            "cells": sum(c.cell_type == "code" for c in nb.cells)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = json.loads(argv[0])
    if config.get("parent_death"):
        import signal
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if config.get("setup"):
        _setup_namespace(config["setup"])
    if config.get("uid") is not None:
        _drop_to(int(config["uid"]), int(config["gid"]))
    elif config.get("drop_capabilities"):
        _drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_DUMPABLE, 0)   # the notebook's processes cannot read this one's memory or pipes
    workdir = config["workdir"]
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    for name in ("home", ".ipython", ".mpl", ".tmp", ".jupyter"):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    if config.get("probe"):
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401

        import servingmath.checks  # noqa: F401
        _emit({"t": "probe", "uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd()})
        return 0
    data = sys.stdin.buffer.read(MAX_NOTEBOOK + 1)
    if len(data) > MAX_NOTEBOOK:
        _emit({"t": "status", "state": "runner error: notebook too large", "errors": [], "timed_out": [], "cells": 0})
        return 0
    import nbformat

    nb = nbformat.reads(data.decode("utf-8", "replace"), as_version=4)
    _emit(_run(nb, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
