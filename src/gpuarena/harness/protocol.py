"""Messages between supervisor and worker over one socket.

Supervisor -> worker: pickled request models (messages.py; the worker trusts the supervisor).
Worker -> supervisor: JSON only, size-capped: the supervisor never unpickles anything the
untrusted side produced, so a hostile solution cannot run code in the supervisor; the JSON is
then validated against the request's reply model (messages.read_reply).
"""

from __future__ import annotations

import json
import pickle
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuarena.contracts.messages import Request

MAX_REPLY_BYTES = 64 << 20


class WorkerGone(Exception):
    """The worker closed its end: it exited or crashed."""


def send_request(conn: Connection, message: Request[Any]) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive_request(conn: Connection) -> Request[Any]:
    from gpuarena.contracts.messages import Request  # pydantic: the worker has it loaded by now

    request = pickle.loads(conn.recv_bytes())
    if not isinstance(request, Request):
        raise TypeError(f"not a harness request: {type(request).__name__}")
    return request


def send_reply(conn: Connection, message: dict[str, Any]) -> None:
    """A reply in its wire form: the reply model's JSON fields and the request's nonce."""
    conn.send_bytes(json.dumps(message).encode())


def receive_reply(conn: Connection, timeout: float) -> dict[str, Any] | None:
    """The worker's next JSON reply; None on timeout; WorkerGone when it died."""
    try:
        if not conn.poll(max(timeout, 0.0)):
            return None
        raw = conn.recv_bytes(MAX_REPLY_BYTES)
    except (EOFError, OSError) as exc:
        raise WorkerGone(str(exc)) from None
    return parse_reply(raw)


MAX_DEPTH = 32
MAX_INT_DIGITS = 24
"""Replies nest a few levels and carry nanosecond counts: anything deeper or longer is not ours."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed reply, iteratively (no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def parse_reply(raw: bytes) -> dict[str, Any]:
    """A worker's frame as a reply, or {"op": "garbage", "why": ...}: never an exception, whatever
    the bytes (too deep for the parser, huge integers, not JSON, not an object)."""
    try:
        reply = json.loads(raw, parse_int=_bounded_int, parse_constant=lambda name: float("nan"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        return {"op": "garbage", "why": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if not isinstance(reply, dict):
        return {"op": "garbage", "why": f"a JSON {type(reply).__name__}, not an object"}
    if _depth(reply, MAX_DEPTH) > MAX_DEPTH:
        return {"op": "garbage", "why": f"nested deeper than {MAX_DEPTH} levels"}
    return reply


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
            socket.send_fds(sock, [b"F"], fds[at : at + FDS_PER_MESSAGE])
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
