"""A seccomp filter for confined children, built with libseccomp through ctypes.

Landlock confines which files a child may open, not what it may do to them or to the system:
it does not cover changing a file's mode, owner, times or extended attributes, tracing another
process, mounting, new namespaces, keyrings, BPF, perf events or kernel modules. The filter
allows every system call except those (``DENIED``), which fail with EPERM, and
``socket(AF_UNIX, ...)`` (so no Unix socket outside the workspace is reachable:
``socketpair`` stays allowed). io_uring is denied too: its operations bypass seccomp.

The program is built once in the parent (``program()``) and exported as raw BPF, so the child
between fork and exec only makes one ``prctl`` (``install``); names this architecture or this
libseccomp does not know are skipped. Only the standard library and ctypes are used.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

DENIED = (
    # a file's mode, owner, times, extended attributes
    "chmod", "fchmod", "fchmodat", "fchmodat2",
    "chown", "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32",
    "utime", "utimes", "futimesat", "utimensat", "utimensat_time64",
    "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
    "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # mounts and namespaces
    "mount", "umount", "umount2", "mount_setattr", "open_tree", "open_tree_attr",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "chroot",
    "unshare", "setns",
    # keyrings, BPF, perf events, kernel images and modules
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    # io_uring runs operations (socket, setxattr ...) that seccomp never sees
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)
AF_UNIX = 1

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO_BASE = 0x00050000
SCMP_CMP_MASKED_EQ = 7
PR_GET_SECCOMP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 21, 22, 2


class SeccompError(OSError):
    """The filter could not be built or installed; the child must not run without it."""


class _ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class _SockFprog(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_LIB = None
_PROGRAMS: dict[bool, tuple] = {}


def library():
    """libseccomp, loaded once; None when it is not installed."""
    global _LIB
    if _LIB is None:
        name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            return None
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                               ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.restype = None
        _LIB = lib
    return _LIB


def kernel_supports_filters() -> bool:
    """Whether this kernel has seccomp filters (PR_GET_SECCOMP answers instead of EINVAL)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(ctypes.c_int(PR_GET_SECCOMP), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)) >= 0


def unavailable_reason() -> str:
    """'' when filters can be built and installed here, else why not."""
    if os.uname().sysname != "Linux":
        return "seccomp exists only on Linux"
    if library() is None:
        return "libseccomp (libseccomp.so.2) is not installed"
    if not kernel_supports_filters():
        return "this kernel has no seccomp filter support"
    return ""


def resolve(name: str) -> int:
    """The native number of a system call; negative when this architecture has none."""
    lib = library()
    if lib is None:
        raise SeccompError(0, "libseccomp is not installed")
    return int(lib.seccomp_syscall_resolve_name(name.encode()))


def _check(rc: int, what: str) -> None:
    if rc < 0:
        raise SeccompError(-rc, f"{what}: {os.strerror(-rc)}")


def build(deny_unix_sockets: bool = True, denied: tuple = DENIED) -> bytes:
    """The filter as raw BPF (struct sock_filter[]): allow all, deny ``denied`` (EPERM) and,
    when asked, ``socket(AF_UNIX, ...)``. Raises SeccompError when libseccomp fails."""
    lib = library()
    if lib is None:
        raise SeccompError(0, "libseccomp (libseccomp.so.2) is not installed")
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompError(0, "seccomp_init failed")
    eperm = SCMP_ACT_ERRNO_BASE | errno.EPERM
    try:
        for name in denied:
            nr = resolve(name)
            if nr >= 0:  # known here (a negative number is another architecture's call)
                _check(lib.seccomp_rule_add_array(ctx, eperm, nr, 0, None), f"deny {name}")
        if deny_unix_sockets:
            # the family is an int: compare the low 32 bits only (high bits are ignored by
            # the kernel, so an exact 64-bit comparison could be dodged)
            cmp = (_ArgCmp * 1)(_ArgCmp(0, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, AF_UNIX))
            _check(lib.seccomp_rule_add_array(ctx, eperm, resolve("socket"), 1, cmp),
                   "deny socket(AF_UNIX)")
        read_fd, write_fd = os.pipe()
        try:
            _check(lib.seccomp_export_bpf(ctx, write_fd), "seccomp_export_bpf")
            os.close(write_fd)
            write_fd = -1
            chunks = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    finally:
        lib.seccomp_release(ctx)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise SeccompError(0, f"libseccomp exported {len(program)} bytes, not a BPF program")
    return program


def program(deny_unix_sockets: bool = True):
    """The built filter, kept for the life of the process (build it in the parent before
    fork): a (buffer, sock_fprog) pair for ``install``."""
    if deny_unix_sockets not in _PROGRAMS:
        code = build(deny_unix_sockets)
        buffer = ctypes.create_string_buffer(code, len(code))
        prog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
        _PROGRAMS[deny_unix_sockets] = (buffer, prog)
    return _PROGRAMS[deny_unix_sockets]


def install(built, libc=None) -> None:
    """In the child, last before exec: load the filter (no_new_privs must already be set).
    Raises SeccompError when the kernel refuses it."""
    libc = libc or ctypes.CDLL(None, use_errno=True)
    _buffer, prog = built
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                  ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
