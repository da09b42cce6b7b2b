"""Nothing one program leaves in a worker reaches the next program run there.

System V message queues, shared memory and semaphores, and POSIX message queues live in the
IPC namespace, which bubblewrap makes once per worker: with the seccomp filter an instance
cannot create them (except a POSIX queue made by ``open`` in ``/dev/mqueue``); the zygote
removes every queue left in ``/dev/mqueue`` when the instance closes, and without the filter
(``seccomp=False``) every System V object too.
"""

from __future__ import annotations

import pytest

from conftest import PROBE_WRAPPER

from testbeds.spade.sandbox import SandboxConfig, SandboxPool

WRAPPER = PROBE_WRAPPER

WRITER = '''
import ctypes, os
KEY = 0x5EC2E7
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    out = {}
    queue = libc.msgget(KEY, 0o1666)
    message = ctypes.create_string_buffer(8 + 64)
    ctypes.memmove(message, (1).to_bytes(8, "little"), 8)
    ctypes.memmove(ctypes.addressof(message) + 8, b"SECRET_FROM_EPISODE_A", 21)
    out["msg"] = queue >= 0 and libc.msgsnd(queue, message, 21, 0) == 0
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(KEY, 4096, 0o1666)
    if segment >= 0:
        address = libc.shmat(segment, None, 0)
        ctypes.memmove(address, b"SECRET_FROM_EPISODE_A", 21)
        out["shm"] = True
    else:
        out["shm"] = False
    out["sem"] = libc.semget(KEY, 1, 0o1666) >= 0
    out["mq"] = libc.mq_open(b"/secret", 0o102, 0o666, None) >= 0
    try:  # open(2) in the mqueue file system makes a queue without mq_open
        os.close(os.open("/dev/mqueue/note", os.O_CREAT | os.O_RDWR, 0o666))
        out["mq_file"] = True
    except OSError:
        out["mq_file"] = False
    return out'''

READER = '''
import ctypes, os
KEY = 0x5EC2E7
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    found = []
    queue = libc.msgget(KEY, 0)
    if queue >= 0:
        buffer = ctypes.create_string_buffer(8 + 64)
        size = libc.msgrcv(queue, buffer, 64, 0, 0o4000)  # IPC_NOWAIT
        found.append(("msg", buffer.raw[8:8 + max(size, 0)]))
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(KEY, 0, 0)
    if segment >= 0:
        found.append(("shm", ctypes.string_at(libc.shmat(segment, None, 0), 21)))
    if libc.semget(KEY, 0, 0) >= 0:
        found.append(("sem", True))
    if libc.mq_open(b"/secret", 0o2, 0, None) >= 0:  # O_RDWR, no create
        found.append(("mq", True))
    found += [("mqueue file", name) for name in os.listdir("/dev/mqueue")]
    for table in ("msg", "shm", "sem"):
        rows = open(f"/proc/sysvipc/{table}").read().splitlines()[1:]
        if rows:
            found.append((table + " table", len(rows)))
    return found'''


@pytest.mark.parametrize("seccomp", [True, False], ids=["seccomp", "no_seccomp"])
def test_ipc_state_does_not_cross_episodes(seccomp):
    config = SandboxConfig(workers=1, enforce_import_allowlist=False, seccomp=seccomp,
                           allow_degraded=True)
    with SandboxPool(config) as pool:
        with pool.load(WRAPPER.format(body=WRITER)) as env:
            made = env.reset(0).obs
        if seccomp:
            assert made == "{'msg': False, 'shm': False, 'sem': False, 'mq': False, 'mq_file': True}"
        else:
            assert made == "{'msg': True, 'shm': True, 'sem': True, 'mq': True, 'mq_file': True}"
        with pool.load(WRAPPER.format(body=READER)) as env:
            assert env.reset(0).obs == "[]"
