"""bench/service.py's load: a `gpuarena serve` process to measure, lean keep-alive clients
hammering it from several processes (latencies, and the server's CPU time per request read
from /proc), and live event streams held open against it.

Split from service.py so that the load generator is read apart from the scenarios that use
it; contest_leaderboard_reads.py uses it too (through service.py's names).
"""

from __future__ import annotations

import http.client
import json as _json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(url: str, home: Path, **extra_env: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "GPUARENA_SUBMIT_LIMIT": "0",
        "GPUARENA_MAX_IN_FLIGHT": "0",
        "PYTHONPATH": str(ROOT / "src"),
        **extra_env,
    }
    log = open(home / f"serve-{port}.log", "w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuarena.cli",
            "serve",
            "--port",
            str(port),
            "--no-runner",
            "--home",
            str(home),
            "--database",
            url,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(base + "/api/health").status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"server did not start; see {log.name}")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Answer:
    def __init__(self, status_code: int, body: bytes):
        self.status_code, self.content = status_code, body


class LeanClient:
    """A keep-alive HTTP/1.1 client on the standard library: a few times cheaper per request
    than httpx, so that the load generator, which shares the cores with the server, takes less
    of them from it."""

    def __init__(self, base: str):
        parsed = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Answer:
        self.connection.request(method, path, body=body, headers=headers or {})
        answer = self.connection.getresponse()
        return Answer(answer.status, answer.read())

    def get(self, path: str, params: dict | None = None, headers: dict | None = None) -> Answer:
        return self.request("GET", path + ("?" + urllib.parse.urlencode(params) if params else ""), headers=headers)

    def post(self, path: str, json: dict, headers: dict | None = None) -> Answer:
        return self.request(
            "POST",
            path,
            body=_json.dumps(json).encode(),
            headers={"Content-Type": "application/json", **(headers or {})},
        )

    def __enter__(self) -> LeanClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.connection.close()


def _client(base: str, worker: int, seconds: float, request, start, results) -> None:
    """One client process: `request(http, worker, i)` in a loop until `seconds` have passed."""
    latencies: list[float] = []
    failed = 0
    with LeanClient(base) as http:
        request(http, worker, -1)  # connect before the clock starts
        start.wait()
        stop = time.monotonic() + seconds
        i = 0
        while time.monotonic() < stop:
            began = time.perf_counter()
            answer = request(http, worker, i)
            elapsed = time.perf_counter() - began
            if answer.status_code < 300:
                latencies.append(elapsed)
            else:
                failed += 1
            i += 1
    results.put((latencies, failed))


def hammer(base: str, clients: int, seconds: float, request, server_pid: int) -> dict:
    """Run `request(http, worker, i)` from `clients` client processes (independent, like real
    users: no shared GIL) for `seconds`; latencies of the 2xx answers, and the server's CPU time
    per request (robust to other work on the machine)."""
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(clients + 1), context.Queue()
    workers = [
        context.Process(target=_client, args=(base, w, seconds, request, start, results), daemon=True)
        for w in range(clients)
    ]
    for worker in workers:
        worker.start()
    start.wait(timeout=60)
    cpu_before = cpu_seconds(server_pid)
    began = time.monotonic()
    latencies: list[float] = []
    failed = 0
    for _ in workers:
        some, more_failed = results.get(timeout=seconds + 120)
        latencies += some
        failed += more_failed
    took = time.monotonic() - began
    cpu = cpu_seconds(server_pid) - cpu_before
    for worker in workers:
        worker.join(timeout=30)
    return {
        "clients": clients,
        "seconds": round(took, 1),
        "requests": len(latencies),
        "failed": failed,
        "per_second": round(len(latencies) / took, 1),
        "p50_ms": round(1000 * percentile(latencies, 50), 2),
        "p99_ms": round(1000 * percentile(latencies, 99), 2),
        "server_cpu_ms_per_request": round(1000 * cpu / max(1, len(latencies) + failed), 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


def open_streams(base: str, submission_ids: list[int], count: int) -> tuple[threading.Event, list[threading.Thread]]:
    """`count` anonymous live event streams, spread over the submissions, each read in a
    thread until the event is set; returns once every stream has its first event."""
    stop, started = threading.Event(), threading.Semaphore(0)
    refused: list[int] = []

    def listen(i: int) -> None:
        sid = submission_ids[i % len(submission_ids)]
        first = True
        try:
            with httpx.Client(base_url=base, timeout=httpx.Timeout(30.0, read=None)) as http:
                with http.stream("GET", f"/api/submissions/{sid}/events") as response:
                    if response.status_code != 200:
                        refused.append(response.status_code)
                        return
                    for _ in response.iter_lines():
                        if first:
                            started.release()
                            first = False
                        if stop.is_set():
                            return
        except httpx.HTTPError:
            if not stop.is_set():  # the server going away at the end is no news
                raise
        finally:
            if first:
                started.release()

    threads = [threading.Thread(target=listen, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for _ in threads:
        started.acquire(timeout=120)
    if refused:
        raise RuntimeError(f"{len(refused)} streams refused: {sorted(set(refused))}")
    return stop, threads
