"""The child side of :mod:`headloc.data.sandbox`: the script each model-written program runs under,
as ``python -I sandbox_child.py ROOT AS_BYTES CPU_S FSIZE_BYTES``. It sets the resource limits, then
installs the audit-hook guard (layers 4 and 6 of the sandbox's docstring) and runs ``program.py``.

A file of its own because it is the script of a fresh isolated interpreter (``-I`` ignores
``PYTHONPATH`` and the script's folder), which may find no headloc or another copy of it: it needs
nothing but the standard library, and nothing of the parent's side runs before the program.
"""

from __future__ import annotations

import os
import sys

#: Exit status of a program the guard stopped, and the stderr line that says why.
BLOCKED_EXIT = 113
BLOCKED_MARKER = "headloc-sandbox: blocked "

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# event -> positions of (path, dir_fd) pairs that must lie inside the sandbox directory
_PATH_EVENTS = {
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),),
    "os.rename": ((0, 2), (1, 3)), "os.chmod": ((0, 2),), "os.chown": ((0, 3),),
    "os.utime": ((0, 3),), "os.truncate": ((0, None),), "os.chdir": ((0, None),),
    "os.setxattr": ((0, None),), "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),), "shutil.move": ((0, None), (1, None)),
    "shutil.copyfile": ((1, None),), "shutil.copymode": ((1, None),),
    "shutil.copystat": ((1, None),), "shutil.copytree": ((1, None),),
    "shutil.chown": ((0, None),), "dbm.open": ((0, None),),
}
_REFUSED = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.posix_spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "os.link", "os.symlink", "webbrowser.open",
    "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
    "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
    "socket.getnameinfo", "socket.sethostname", "urllib.Request", "http.client.connect",
    "ftplib.connect", "smtplib.connect", "poplib.connect", "imaplib.open", "nntplib.connect",
    "telnetlib.Telnet.open", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "resource.setrlimit", "resource.prlimit", "sqlite3.enable_load_extension",
    "sqlite3.load_extension", "sys.remote_exec",
})
_REFUSED_IMPORTS = frozenset({"_posixsubprocess", "_xxsubinterpreters", "_xxinterpchannels",
                              "_testcapi", "_testinternalcapi", "_testmultiphase"})
_PROC_TOP_OK = frozenset({"cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version"})


def _make_guard(root: str):
    """The audit hook for a program confined to ``root`` (a real path).

    Everything the hook calls is bound here, as C functions or methods of immutable builtin
    types, so that the program cannot steer it by patching ``os``, ``posixpath`` or ``builtins``.
    """
    import posix
    import stat as _stat_mod

    _lstat, _readlink, _getcwd, _getpid = posix.lstat, posix.readlink, posix.getcwd, posix.getpid
    _stat, _write, _exit, _fspath = posix.stat, posix.write, posix._exit, posix.fspath
    _S_ISLNK, _S_ISDIR = _stat_mod.S_ISLNK, _stat_mod.S_ISDIR
    _item = tuple.__getitem__
    _as_str, _decode, _as_int = str.__str__, bytes.decode, int.__index__
    _startswith, _split, _join, _encode = str.startswith, str.split, str.join, str.encode
    _isdigit, _append, _pop, _len = str.isdigit, list.append, list.pop, len
    _type, _str, _bytes, _int, _repr = type, str, bytes, int, repr
    _isinstance, _bool = isinstance, bool
    _OSError, _Exception = OSError, Exception
    _path_events, _refused, _refused_imports = dict(_PATH_EVENTS), _REFUSED, _REFUSED_IMPORTS
    _proc_top_ok, _write_flags, _marker = _PROC_TOP_OK, _WRITE_FLAGS, BLOCKED_MARKER
    _af_unix, _blocked_exit = 1, BLOCKED_EXIT
    root_slash = root + "/"

    def refuse(event, detail):
        line = _marker + event + " " + _repr(detail)[:300] + "\n"
        try:
            _write(2, _encode(line, "utf-8", "backslashreplace"))
        finally:
            _exit(_blocked_exit)

    def fd_path(fd):
        return _readlink("/proc/self/fd/" + _str(_as_int(fd)))

    def text(path):
        """``path`` as an exact str (None for file descriptors)."""
        t = _type(path)
        if t is not _str and t is not _bytes and not _isinstance(path, (_str, _bytes, _int)):
            path = _fspath(path)
        if _isinstance(path, _str):
            return _as_str(path)
        if _isinstance(path, _bytes):
            return _decode(path, "utf-8", "surrogateescape")
        return None

    def realpath(path, base):
        """Resolve ``path`` (relative to ``base``) through symlinks, like the kernel would."""
        if not _startswith(path, "/"):
            path = base + "/" + path
        todo = _split(path, "/")[::-1]
        parts, hops = [], 0
        while todo:
            part = _pop(todo)
            if part == "" or part == ".":
                continue
            if part == "..":
                if parts:
                    _pop(parts)
                continue
            here = "/" + _join("/", parts + [part])
            try:
                mode = _item(_lstat(here), 0)
            except _OSError:
                _append(parts, part)
                continue
            if _S_ISLNK(mode):
                hops += 1
                if hops > 40:
                    return None
                target = _readlink(here)
                if _startswith(target, "/"):
                    parts = []
                todo = todo + _split(target, "/")[::-1]
            else:
                _append(parts, part)
        return "/" + _join("/", parts)

    def resolve(path, dir_fd=None):
        """The real path ``path`` names, or None if it cannot be told."""
        if _isinstance(path, _int) and not _isinstance(path, _bool):
            return realpath(fd_path(path), "/")
        p = text(path)
        if p is None:
            return None
        if dir_fd is not None and dir_fd != -1 and not _startswith(p, "/"):
            base = fd_path(dir_fd)
        else:
            base = _getcwd()
        return realpath(p, base)

    # Besides the directory: /dev/null, and the program's own stdout/stderr (/dev/stdout, ...).
    writable = frozenset({"/dev/null", realpath(fd_path(1), "/"), realpath(fd_path(2), "/")})

    def inside(real):
        return real is not None and (
            real == root or _startswith(real, root_slash) or real in writable)

    def other_process(real):
        """True for /proc entries of other processes (their environment, memory, ...)."""
        if real is None or not _startswith(real, "/proc/"):
            return False
        first = _split(real, "/")[2] if _len(_split(real, "/")) > 2 else ""
        if _isdigit(first):
            return first != _str(_getpid())
        return first not in _proc_top_ok and first != ""

    def hook(event, args):
        try:
            if event == "open":
                path, mode, flags = args
                if path is None or (_isinstance(path, _int) and not _isinstance(path, _bool)):
                    return
                p = text(path)
                real = resolve(path)
                if other_process(real):
                    refuse(event, p)
                writing = _isinstance(flags, _int) and (flags & _write_flags) != 0
                if mode is None:  # os.open: its dir_fd is not in the event
                    if not _startswith(p, "/") and ".." in _split(p, "/"):
                        refuse(event, "relative os.open with '..': " + p)
                    if not inside(real):
                        if writing:
                            refuse(event, p)
                        try:
                            if _S_ISDIR(_item(_stat(real), 0)):
                                refuse(event, "directory outside the sandbox: " + p)
                        except _OSError:
                            pass
                elif writing and not inside(real):
                    refuse(event, p)
            elif event in _path_events:
                for i, j in _path_events[event]:
                    dir_fd = args[j] if j is not None and j < _len(args) else None
                    if not inside(resolve(args[i], dir_fd)):
                        refuse(event, args[i])
            elif event in _refused:
                refuse(event, args)
            elif event == "import":
                if args[0] in _refused_imports:
                    refuse(event, args[0])
            elif event == "socket.__new__":
                if args[1] != _af_unix:
                    refuse(event, "address family " + _repr(args[1]))
            elif event == "os.kill" or event == "os.killpg":
                if args[0] != _getpid() or event == "os.killpg":
                    refuse(event, args)
            elif _startswith(event, "ctypes."):
                if not (event == "ctypes.dlopen" and args[0] is None):
                    refuse(event, args)
            elif event == "sqlite3.connect":
                db = args[0]
                if db not in (":memory:", "", b":memory:", b"") and not inside(resolve(db)):
                    refuse(event, db)
        except _Exception as error:  # a hook that cannot decide refuses
            refuse(event, "guard error " + _repr(error))

    return hook


def _fork_exec_refused(*args, **kwargs):
    os.write(2, f"{BLOCKED_MARKER}_posixsubprocess.fork_exec {args[:1]!r}\n".encode())
    os._exit(BLOCKED_EXIT)


def _child_main(argv: list[str]) -> None:
    import resource
    import traceback
    import types

    root, mem, cpu, fsize = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    for limit, soft, hard in ((resource.RLIMIT_AS, mem, mem), (resource.RLIMIT_CPU, cpu, cpu + 1),
                              (resource.RLIMIT_FSIZE, fsize, fsize),
                              (resource.RLIMIT_NOFILE, 256, 256), (resource.RLIMIT_CORE, 0, 0)):
        _, old_hard = resource.getrlimit(limit)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(limit, (soft, hard))
    with open(os.path.join(root, "program.py"), encoding="utf-8") as f:
        source = f.read()
    main = types.ModuleType("__main__")
    main.__file__ = os.path.join(root, "program.py")
    sys.argv = ["program.py"]
    # _posixsubprocess.fork_exec starts processes without an audit event (subprocess.Popen has
    # one), so it is replaced before the program runs; a re-import raises "import" and is refused.
    import _posixsubprocess

    _posixsubprocess.fork_exec = _fork_exec_refused
    try:
        code = compile(source, "program.py", "exec")
        sys.addaudithook(_make_guard(root))
        sys.modules["__main__"] = main
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as error:  # the program's traceback, without this function's frame
        traceback.print_exception(error.with_traceback(error.__traceback__.tb_next))
        raise SystemExit(1) from None


if __name__ == "__main__":
    _child_main(sys.argv[1:])
