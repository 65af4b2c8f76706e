"""Webhooks: when a submission finishes (a verdict, ERROR or CANCELLED), the service POSTs it as
JSON to each webhook of its author, so that chat bots and CI can be told. The body is signed:
the header `X-Gpuarena-Signature: sha256=<hex>` is HMAC-SHA256 of the exact body with the
webhook's secret (shown to its owner once). Deliveries run on a thread of their own (a slow
receiver never holds up a runner's result) with a few retries, and the last outcome is kept."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
import time
from typing import cast
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
from sqlalchemy import select

from gpuarena.errors import GpuarenaError
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.schemas import SubmissionOut
from gpuarena.service.tables import Submission, Webhook, utcnow

log = logging.getLogger("gpuarena.webhooks")
SIGNATURE_HEADER = "X-Gpuarena-Signature"
PER_USER = 5
ATTEMPTS = 3
TIMEOUT_S = 5.0


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _checked_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    """The addresses host resolves to now, each checked: none may be this machine or a private
    network unless the server allows those (GPUARENA_WEBHOOK_ALLOW_PRIVATE)."""
    try:
        # an IPv4 or IPv6 address's host is text (typeshed's sockaddr also allows other families' int)
        found = [cast(str, info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except OSError:
        raise GpuarenaError(f"url: {host} does not resolve") from None
    addresses = list(dict.fromkeys(found))
    if not allow_private:
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%")[0])
            if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast:
                raise GpuarenaError(
                    f"url: {host} is a private or local address ({ip}); this server calls public addresses only"
                )
    return addresses


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def check_url(url: str, allow_private: bool) -> str:
    """An http(s) URL whose host does not resolve to this machine or a private network, unless
    the server allows those (GPUARENA_WEBHOOK_ALLOW_PRIVATE): otherwise a user could make the
    service call its own admin endpoints or a cloud's metadata address. Checked when a webhook
    is made and again at each delivery (a name may resolve elsewhere later)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 500:
        raise GpuarenaError("url: give an http:// or https:// address of at most 500 characters")
    if not allow_private:
        _checked_addresses(parts.hostname, _port(parts), allow_private)
    return url.strip()


def create(db: Database, who: Caller, url: str, allow_private: bool) -> tuple[Webhook, str]:
    checked = check_url(url, allow_private)
    with db.write() as session:
        count = len(session.scalars(select(Webhook.id).where(Webhook.user_id == who.user_id)).all())
        if count >= PER_USER:
            raise GpuarenaError(f"you have {count} webhooks; the limit is {PER_USER}: delete one first")
        secret = secrets.token_hex(32)
        hook = Webhook(user_id=who.user_id, url=checked, secret=secret)
        session.add(hook)
        session.flush()
        session.expunge(hook)
        return hook, secret


def listed(db: Database, who: Caller) -> list[Webhook]:
    with db.read() as session:
        hooks = list(session.scalars(select(Webhook).where(Webhook.user_id == who.user_id).order_by(Webhook.id)))
        for hook in hooks:
            session.expunge(hook)
        return hooks


def delete(db: Database, who: Caller, hook_id: int) -> None:
    with db.write() as session:
        hook = session.get(Webhook, hook_id)
        if hook is None:
            raise NotFound(f"no webhook {hook_id}")
        if hook.user_id != who.user_id and who.role != "admin":
            raise Forbidden(f"webhook {hook_id} is not yours")
        session.delete(hook)


def notify(db: Database, submission_id: int, allow_private: bool) -> None:
    """Tell the author's webhooks that a submission finished, in the background; each target is
    checked again as it is called (allow_private: the server's GPUARENA_WEBHOOK_ALLOW_PRIVATE)."""
    from gpuarena.service.submissions import to_out

    with db.read() as session:
        submission = session.get(Submission, submission_id)
        if submission is None:
            return
        targets = [
            (h.id, h.url, h.secret)
            for h in session.scalars(select(Webhook).where(Webhook.user_id == submission.user_id))
        ]
        if not targets:
            return
        shown: SubmissionOut = to_out(submission, private=True)  # the author's own hooks
    body = json.dumps(
        {"event": "submission.finished", "submission": json.loads(shown.model_dump_json())}, sort_keys=True
    ).encode()
    for hook_id, url, secret in targets:
        threading.Thread(
            target=_deliver, args=(db, hook_id, url, secret, body, allow_private), name="webhook", daemon=True
        ).start()


def _post_checked(url: str, body: bytes, headers: dict[str, str], allow_private: bool) -> httpx.Response:
    """POST to url at an address its host resolves to now and that passes check_url's test: the
    connection goes to that very address (the Host header and TLS name stay the host's), so a
    name cannot resolve to a public address for the check and a private one for the call."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GpuarenaError("url: not an http:// or https:// address")
    addresses = _checked_addresses(parts.hostname, _port(parts), allow_private)
    host_header = parts.netloc.rpartition("@")[2]
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    for i, address in enumerate(addresses):
        shown = f"[{address}]" if ":" in address else address
        pinned = urlunsplit((parts.scheme, f"{shown}:{_port(parts)}", parts.path, parts.query, ""))
        try:
            with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
                request = client.build_request(
                    "POST", pinned, content=body, headers={**headers, "Host": host_header}, extensions=extensions
                )
                return client.send(request)
        except httpx.ConnectError:
            if i == len(addresses) - 1:
                raise
    raise GpuarenaError(f"url: {parts.hostname} does not resolve")


def _deliver(db: Database, hook_id: int, url: str, secret: str, body: bytes, allow_private: bool) -> None:
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(secret, body),
        "User-Agent": "gpuarena-webhook",
    }
    outcome = ""
    for attempt in range(ATTEMPTS):
        try:
            response = _post_checked(url, body, headers, allow_private)
            outcome = f"HTTP {response.status_code}"
            if response.status_code < 500:
                break
        except GpuarenaError as exc:  # the target fails the check now: not called, not retried
            outcome = f"not called: {exc}"
            log.warning("webhook %s: %s", hook_id, outcome)
            break
        except httpx.HTTPError as exc:
            outcome = f"{type(exc).__name__}: {exc}"[:200]
        time.sleep(0.5 * 2**attempt)
    try:
        with db.write() as session:
            hook = session.get(Webhook, hook_id)
            if hook is not None:
                hook.last_called_at, hook.last_status = utcnow(), outcome[:200]
    except Exception:  # the server may be shutting down: the delivery itself is what mattered
        log.warning("webhook %s: could not record the outcome %r", hook_id, outcome)
