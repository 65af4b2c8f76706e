"""Messages between supervisor and worker over one socket.

Supervisor -> worker: pickled dicts (the worker trusts the supervisor).
Worker -> supervisor: JSON only, size-capped: the supervisor never unpickles anything the
untrusted side produced, so a hostile solution cannot run code in the supervisor.
"""

from __future__ import annotations

import json
import pickle
from multiprocessing.connection import Connection
from typing import Any

MAX_REPLY_BYTES = 64 << 20


class WorkerGone(Exception):
    """The worker closed its end: it exited or crashed."""


def send_request(conn: Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive_request(conn: Connection) -> dict[str, Any]:
    return pickle.loads(conn.recv_bytes())


def send_reply(conn: Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(message).encode())


def receive_reply(conn: Connection, timeout: float) -> dict[str, Any] | None:
    """The worker's next JSON reply; None on timeout; WorkerGone when it died."""
    try:
        if not conn.poll(max(timeout, 0.0)):
            return None
        raw = conn.recv_bytes(MAX_REPLY_BYTES)
    except (EOFError, OSError) as exc:
        raise WorkerGone(str(exc)) from None
    try:
        reply = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"op": "garbage"}
    return reply if isinstance(reply, dict) else {"op": "garbage"}


FDS_PER_MESSAGE = 200
"""SCM_RIGHTS carries at most 253 descriptors per message on Linux."""


def send_fds(conn: Connection, fds: list[int]) -> None:
    """Pass file descriptors (SCM_RIGHTS) right after a request, in messages of one byte each;
    the receiver knows from the request how many to expect."""
    import os
    import socket

    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        for at in range(0, len(fds), FDS_PER_MESSAGE):
            socket.send_fds(sock, [b"F"], fds[at:at + FDS_PER_MESSAGE])
    finally:
        sock.close()


def receive_fds(conn: Connection, count: int) -> list[int]:
    """The worker's side of send_fds."""
    import os
    import socket

    sock = socket.socket(fileno=os.dup(conn.fileno()))
    fds: list[int] = []
    try:
        while len(fds) < count:
            data, got, _, _ = socket.recv_fds(sock, 1, min(FDS_PER_MESSAGE, count - len(fds)))
            if not data:
                raise EOFError("the harness socket closed while receiving file descriptors")
            fds += got
    finally:
        sock.close()
    return fds
