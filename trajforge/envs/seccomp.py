"""A seccomp filter for the code sandbox: deny the syscalls sandboxed code never needs.

Namespaces and dropped capabilities already make ``mount``, ``chroot`` or ``unshare`` fail; the
filter is the second wall, and the only one for calls that namespaces allow: without it a
sandboxed program may ``ptrace`` (and so stop or rewrite) the sandbox's own init process, use
``io_uring`` (which can bypass other filters), or reach kernel surfaces such as ``bpf``,
``perf_event_open``, ``userfaultfd`` and the keyring, or hold memory that no limit counts
(``memfd_create``, SysV ``shmget``). This is the core of the deny list Docker and Flatpak apply.
Denied calls fail with EPERM, so the program sees an ordinary error.

bubblewrap takes the filter as compiled classic BPF on a file descriptor (``--seccomp FD``);
``filter_program()`` returns those bytes. Syscall numbers differ per architecture: x86_64 and
aarch64 are listed (checked against the kernel headers); elsewhere ``filter_program()`` returns
None and the sandbox runs without the filter (the self-test says so).
"""

from __future__ import annotations

import errno
import platform
import struct

# Denied syscalls, by name: (x86_64 number, aarch64 number). The new mount API and io_uring have
# the same numbers on every architecture.
_DENIED: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "bpf": (321, 280), "perf_event_open": (298, 241),
    "userfaultfd": (323, 282), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264), "syslog": (103, 116), "settimeofday": (164, 170),
    "clock_settime": (227, 112), "adjtimex": (159, 171), "quotactl": (179, 60),
    "vhangup": (153, 58), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    # Memory no process maps and no size-capped tmpfs holds: a memfd written with write() or a
    # SysV segment after shmdt is in nobody's RSS, so the supervisor (memlimit.py) never sees it,
    # and RLIMIT_AS does not bound it. POSIX shm (/dev/shm) and /tmp remain, both capped.
    "memfd_create": (319, 279), "shmget": (29, 194),
}
_X86_ONLY = {"iopl": 172, "ioperm": 173}

# AUDIT_ARCH_* values: seccomp_data.arch for native syscalls.
_ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}
_X32_BIT = 0x40000000  # x86_64 syscalls with this bit use the x32 ABI: a second syscall table

# Classic BPF opcodes (linux/filter.h) and seccomp return actions (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH = 0, 4  # offsets in struct seccomp_data


def denied_syscalls() -> list[str]:
    """Names of the syscalls the filter denies on this machine's architecture."""
    names = list(_DENIED)
    return names + list(_X86_ONLY) if platform.machine() == "x86_64" else names


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for ``machine`` (default: this one), or None if it isn't supported."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    arch, column = _ARCHES[machine]
    deny = _RET_ERRNO | errno.EPERM
    numbers = [pair[column] for pair in _DENIED.values()]
    if machine == "x86_64":
        numbers += list(_X86_ONLY.values())
    prog = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        # A foreign-ABI syscall (i386 via int 0x80 on x86_64) would be looked up in another
        # table, where our numbers mean other calls: deny every one of them.
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, deny),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, deny)]
    for nr in numbers:
        # Equal: fall through to the deny; otherwise skip it.
        prog += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, deny)]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)
