#!/usr/bin/env python3
"""A learner's check-request.sh as an attacker writes it (tests/test_levels.py): it tries every
escape the sandbox must stop and prints one JSON line: what it tried, and what worked."""

import ctypes
import json
import os
import time

T = json.loads(os.environ["HOSTILE_TARGETS"])
SECRET = T["env_value"][::-1]  # given reversed: the targets themselves are in our environment
escapes, tried = [], {}


def note(kind, worked, what=""):
    tried[kind] = tried.get(kind, 0) + 1
    if worked:
        escapes.append(f"{kind}: {what}")


# 1. every file under /proc/sys (and what access() calls writable under /sys), opened to write
for top, everything in (("/proc/sys", True), ("/sys", False)):
    deadline = time.monotonic() + 8
    for directory, dirs, files in os.walk(top):
        if time.monotonic() > deadline:
            break
        dirs[:] = [d for d in dirs if d not in ("debug", "tracing")]
        for name in files:
            path = os.path.join(directory, name)
            if not everything and not os.access(path, os.W_OK):
                continue
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                note("kernel", False)
                continue
            try:  # some check at write time (ns_last_pid is 0666): write its own value back
                with open(path, "rb") as fh:
                    value = fh.read(4096)
            except OSError:
                value = None  # opened to write, not to read: counted as written
            try:
                if value is not None:
                    os.write(fd, value)
                note("kernel", True, path)
            except OSError:
                note("kernel", False)
            finally:
                os.close(fd)

# 2. the keyring: the grader's key by its description, in every keyring we could name
libc = ctypes.CDLL(None, use_errno=True)
for ring in (-3, -4, -5):  # session, user, user-session
    serial = libc.syscall(250, 10, ring, b"user", T["key"].encode(), 0)  # KEYCTL_SEARCH
    note("keyring", serial > 0, f"found in {ring}")
    if serial > 0:
        buf = ctypes.create_string_buffer(256)
        size = libc.syscall(250, 11, serial, buf, 256)  # KEYCTL_READ
        note("keyring", size > 0 and T["key_value"].encode() in buf.raw, "read it")
try:
    with open("/proc/keys") as fh:
        keys = fh.read().splitlines()
except OSError:
    keys = []
for line in keys:  # a key we may view (same uid: its description) must not be readable
    buf = ctypes.create_string_buffer(256)
    size = libc.syscall(250, 11, int(line.split()[0], 16), buf, 256)  # KEYCTL_READ by serial
    note("keyring", size > 0 and T["key_value"].encode() in buf.raw, f"read {line.split()[0]}")

# 3. the grader's files: read them, write them, list their folders
for path in T["files"]:
    try:
        with open(path, "rb") as fh:
            note("files", True, f"read {path}")
            fh.read(1)
    except OSError:
        note("files", False)
    try:
        with open(path, "ab") as fh:
            fh.write(b"pwned")
        note("files", True, f"wrote {path}")
    except OSError:
        note("files", False)
for folder in T["folders"]:
    try:
        os.listdir(folder)
        note("files", True, f"listed {folder}")
    except OSError:
        note("files", False)
    try:
        with open(os.path.join(folder, "pwned.txt"), "w") as fh:
            fh.write("x")
        note("files", True, f"created in {folder}")
    except OSError:
        note("files", False)

# 4. the grader's environment and home
note("env", SECRET in json.dumps(dict(os.environ)), "own environment")
for pid in (T["grader_pid"], 1, os.getppid()):
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            note("env", SECRET.encode() in fh.read(), pid)
    except OSError:
        note("env", False)
try:
    with open(T["home_file"]) as fh:
        note("home", T["home_value"] in fh.read(), "read the home secret")
except OSError:
    note("home", False)

# 5. a process left behind: a setsid daemon, started for real
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
os.wait()
note("process", False)

# 6. 4 GB at once, in as many processes as it takes
held = []
for _ in range(40):
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        break
    if pid == 0:
        try:
            block = bytearray(100 * 1024**2)
            block[::4096] = b"x" * len(block[::4096])
            os.write(w, b"1")
            time.sleep(3)
        except MemoryError:
            os.write(w, b"0")
        os._exit(0)
    os.close(w)
    held.append(os.read(r, 1) == b"1")
    os.close(r)
total = sum(held) * 100 * 1024**2
note("memory", total >= 4 * 10**9, f"{total} bytes at once")
print(json.dumps({"escapes": escapes, "tried": tried, "memory": total}), flush=True)
