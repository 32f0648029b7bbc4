"""The sandbox's launcher: `python -I jail.py <settings.json>`; stdlib only, run in its own process.

Started by `sandbox.PythonSandbox` (never imported by the trainer). With `isolate` on (Linux):

    L (this process, the trainer's user)   clears its supplementary groups (root), forks C, then
                                           writes C's uid/gid maps: inner 0 -> outer `uid`
                                           (65534 "nobody" when we are root, else our own uid)
    C  new user namespace; becomes its root (outer: `uid`, no capability outside it); new mount,
       PID, network, IPC and UTS namespaces; dies with L (PDEATHSIG); forks G
    G  PID 1 of the new PID namespace; dies with C. Mounts: a fresh /proc (this namespace's
       processes only), empty tmpfs over /tmp /var/tmp /run /dev/shm /root /home (Python's own
       directories bound back), the whole tree read-only
       (recursively), then a size-limited tmpfs as the working directory (the only writable
       place). Drops every capability (bounding and ambient sets too), sets no_new_privs and the
       locked securebits, sets the rlimits, installs the audit hook, runs the model's code.

Each step that fails makes the run fail with `UNAVAILABLE_EXIT` and a line starting with
`UNAVAILABLE_MARK` on stderr: the caller refuses to run code rather than run it unisolated.
With `isolate` off (`unsafe_local`), only the rlimits and the audit hook are applied (the old
guarded subprocess). Exit status: the code's; killed by a signal: killed by the same signal.
"""

import ctypes
import json
import os
import resource
import signal
import sys
import traceback

UNAVAILABLE_EXIT = 125
UNAVAILABLE_MARK = "beyondagent-sandbox: isolation unavailable:"

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 0x1000, 0x4000, 1 << 18
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (a syscall added after 5.1)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 28, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECUREBITS_LOCKED = 0b11101111  # noroot, no_setuid_fixup, no_cap_ambient_raise (+ locks), keep_caps locked off
# Empty in the sandbox (no sockets, no others' files, no homes), but for the paths of the Python
# installation that runs it, bound back read-only (a venv may live in /tmp or a home).
HIDDEN = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/root", "/home")

_libc = ctypes.CDLL(None, use_errno=True)


class Unavailable(Exception):
    pass


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise Unavailable(f"{what}: {os.strerror(errno)} (errno {errno})")


def _unshare(flags, what):
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({what})")


def _mount(source, target, fstype, flags, data, what):
    enc = (lambda s: None if s is None else s.encode())
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), what)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _read_only_tree():
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    _check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), b"/",
                         ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
           "mount_setattr(/, recursive read-only)")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_privileges():
    _check(_libc.prctl(PR_SET_SECUREBITS, ctypes.c_ulong(SECUREBITS_LOCKED), 0, 0, 0), "securebits")
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break  # EINVAL past the last capability this kernel knows
    _libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "no_new_privs")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset (drop all capabilities)")


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def _reraise_status(status):
    """Exit like the child did: its exit code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP need no reset
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # pragma: no cover - the signal ends us first
    os._exit(os.waitstatus_to_exitcode(status))


def _fail(message):
    try:
        os.write(2, f"{UNAVAILABLE_MARK} {message}\n".encode())
    finally:
        os._exit(UNAVAILABLE_EXIT)


def _python_views():
    """What the sandbox must still see of a hidden tree: the Python running it (found as we still can).

    Returns (directories to hide, [(path, O_PATH fd)] to bind back). A directory is hidden when it
    is in HIDDEN or when the sandbox's user could not pass through it to Python's files anyway.
    """
    needed = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
                    | {os.path.abspath(sys.prefix)})
    hidden = {path for path in HIDDEN if os.path.isdir(path) and not os.path.islink(path)}
    for path in needed:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            if not os.stat(ancestor).st_mode & 0o001:  # others cannot pass: the sandbox's user cannot
                hidden.add(ancestor)
                break
    hidden = sorted(h for h in hidden if not any(h.startswith(o + "/") for o in hidden))  # outermost only
    binds = []
    for path in needed:
        under_hidden = any(path.startswith(h + "/") for h in hidden)
        covered = any(path.startswith(b + "/") for b, _ in binds)
        if under_hidden and not covered:
            binds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
    return hidden, binds


def _isolate(settings):
    """Runs in L; returns in G (PID 1 of the new namespaces, no capability left) or exits."""
    outer_uid, outer_gid = settings["uid"], settings["gid"]
    if os.geteuid() == 0:
        os.setgroups([])  # no supplementary group (root's) goes with us
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    leader = os.getpid()
    child = os.fork()
    if child:  # L: map C's ids, then wait for it
        signal.signal(signal.SIGTERM, lambda *_: None)  # C gets it too and ends the namespace; wait for it
        os.close(ready_w)
        os.close(go_r)
        if os.read(ready_r, 1) != b"1":  # C could not make its user namespace (it said why)
            _reraise_status(os.waitpid(child, 0)[1])
        try:
            _write(f"/proc/{child}/setgroups", "deny")
            _write(f"/proc/{child}/uid_map", f"0 {outer_uid} 1")
            _write(f"/proc/{child}/gid_map", f"0 {outer_gid} 1")
        except OSError as exc:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            _fail(f"writing the user namespace's id maps: {exc}")
        os.write(go_w, b"1")
        os.close(go_w)
        _reraise_status(os.waitpid(child, 0)[1])
    # C
    os.close(ready_r)
    os.close(go_w)
    try:
        _check(_libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0), "pdeathsig")
        if os.getppid() != leader:
            os._exit(UNAVAILABLE_EXIT)
        try:
            _unshare(CLONE_NEWUSER, "user namespace")
        except Unavailable:
            os.write(ready_w, b"0")
            raise
        # Still our own uid outside (the maps are not written yet): enough to open Python's
        # files under a hidden tree, in the new mount namespace where they will be bound back.
        _unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS,
                 "mount, PID, network, IPC and UTS namespaces")
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None, "making mounts private")
        settings["hidden"], settings["python_fds"] = _python_views()
        os.write(ready_w, b"1")
        if os.read(go_r, 1) != b"1":
            raise Unavailable("the id maps were not written")
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    except (Unavailable, OSError) as exc:
        _fail(str(exc))
    init = os.fork()
    if init:  # C: wait for G (PID 1); when it ends, the kernel ends every process of its namespace
        # G may clear its death signal and leave our process group, so C kills it by pid: on
        # SIGTERM (the caller's timeout) and, should the caller be gone, at its own deadline.
        def kill_init(*_):
            os.kill(init, signal.SIGKILL)

        signal.signal(signal.SIGTERM, kill_init)
        signal.signal(signal.SIGALRM, kill_init)
        signal.alarm(max(1, int(settings["timeout"]) + 2))
        _reraise_status(os.waitpid(init, 0)[1])
    # G
    os.close(ready_w)
    os.close(go_r)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(0)
    try:
        _check(_libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0), "pdeathsig")
        if os.getpid() != 1:
            raise Unavailable("not PID 1 of a new PID namespace")
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mounting /proc")
        workdir = settings["workdir"]
        for path in settings["hidden"]:
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755", f"hiding {path}")
        for path, fd in settings["python_fds"]:
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None, f"binding {path}")
            os.close(fd)
        if not os.path.isdir(workdir):  # under a hidden directory: make its path in the empty tmpfs
            os.makedirs(workdir, mode=0o755)
        _read_only_tree()
        _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={settings['disk_mb']}m,mode=0700",
               "the working directory's tmpfs")
        os.chdir(workdir)
        with open(settings["code_file_name"], "w", encoding="utf-8") as handle:
            handle.write(settings["code"])
        _drop_privileges()
    except (Unavailable, OSError) as exc:
        _fail(str(exc))


def _limit(resource, name, value):
    try:
        resource.setrlimit(getattr(resource, name), (value, value))
    except (ValueError, OSError, AttributeError):
        pass


def _run_code(settings):
    mb = 1024 * 1024
    _limit(resource, "RLIMIT_AS", settings["memory_mb"] * mb)
    _limit(resource, "RLIMIT_CPU", settings["cpu_seconds"])
    _limit(resource, "RLIMIT_FSIZE", settings["max_file_mb"] * mb)
    _limit(resource, "RLIMIT_NPROC", settings["max_processes"])
    _limit(resource, "RLIMIT_NOFILE", settings["max_open_files"])
    _limit(resource, "RLIMIT_CORE", 0)
    source = settings.pop("code")
    _install_guard()
    try:
        code = compile(source, "<code>", "exec")
    except SyntaxError:
        traceback.print_exc(limit=0)
        sys.exit(1)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)


def _install_guard():
    # Clear messages for the common cases (a socket, a subprocess, a fork). Not the boundary:
    # ctypes and _posixsubprocess get around it; the namespaces and limits above are what hold.
    blocked = ("socket.", "os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
               "subprocess.Popen", "pty.spawn", "os.startfile")

    def audit(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"the sandbox does not allow {event}")

    sys.addaudithook(audit)


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        settings = json.load(handle)
    with open(settings["code_path"], encoding="utf-8", errors="replace") as handle:
        settings["code"] = handle.read()
    if settings["isolate"]:
        _isolate(settings)
    _run_code(settings)


if __name__ == "__main__":
    main()
