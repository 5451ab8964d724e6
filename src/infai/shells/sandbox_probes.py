"""Programs ``infai doctor`` runs inside the sandbox to prove what it confines.

Kept as source text for ``python -c``: they run in the sandboxed process, not in
infai, and print what they found for the doctor to judge (the doctor's own
output goes through the shells' sanitizer; these lines never reach a terminal).
"""

from __future__ import annotations

#: io_uring_setup(1, params) by its number (425 on every architecture); prints
#: "ring" when a ring was made, else the error's name
URING_PROBE = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
fd = libc.syscall(ctypes.c_long(425), ctypes.c_long(1), params)
print("ring" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
"""
#: for each path argument, one JSON line: whether a socket is there, and how a stream
#: ``socket`` + ``connect`` and a datagram pair re-pointed at it ended
CONNECT_PROBE = """
import errno, json, os, socket, stat, sys
def attempt(work):
    try:
        work()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "connected"
def stream(path):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
def dgram(path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.connect(path)
for path in sys.argv[1:]:
    try:
        visible = stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        visible = False
    print(json.dumps({"visible": visible,
                      "socket": attempt(lambda: stream(path)),
                      "dgram": attempt(lambda: dgram(path))}))
"""
