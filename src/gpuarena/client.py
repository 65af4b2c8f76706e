"""A small client for the gpuarena JSON API, used by the CLI and by runners."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from gpuarena.contracts.records import Evaluation
from gpuarena.contracts.wire import PROTOCOL_VERSION, DeviceSlot
from gpuarena.dataset.sample import SampleReport
from gpuarena.errors import GpuarenaError
from gpuarena.runner_wire import TYPED_JOB, TypedJob
from gpuarena.solutions.model import Solution


class ApiError(GpuarenaError):
    def __init__(self, message: str, status: int | None = None):
        self.status = status
        self.retry_after: float | None = None
        """429 answers: the server's Retry-After, in seconds."""
        super().__init__(message)


def parse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs from a server-sent event stream, line by line."""
    event, data = "", ""
    for line in lines:
        if not line:
            if event:
                yield event, json.loads(data or "{}")
            event, data = "", ""
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()


class Client:
    """One server, or several API servers over one database ("http://a:8000,http://b:8000"):
    a request that cannot reach the current server raises ApiError (status None) and moves
    the client on to the next one, so a caller's retry goes elsewhere."""

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0):
        servers = [s.strip().rstrip("/") for s in server.split(",") if s.strip()]
        bad = [s for s in servers if not s.startswith(("http://", "https://"))]
        if not servers or bad:
            raise GpuarenaError(
                f"server {server!r}: give a URL such as http://localhost:8000 "
                "(several API servers: separate their URLs with commas)"
            )
        self.servers = servers
        self._current = 0
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(headers=headers, timeout=timeout)

    @property
    def server(self) -> str:
        return self.servers[self._current]

    def _next_server(self) -> None:
        self._current = (self._current + 1) % len(self.servers)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, timeout: float | None = None, **kwargs: Any) -> httpx.Response:
        server = self.server
        try:
            response = self.http.request(method, server + path, timeout=timeout or self.http.timeout, **kwargs)
        except httpx.HTTPError as exc:
            if self.server == server:
                self._next_server()
            raise ApiError(f"cannot reach {server}: {type(exc).__name__}: {exc}") from None
        if response.status_code in (502, 503, 504) and len(self.servers) > 1:
            self._next_server()  # a proxy in front of a server that is down
        if response.status_code >= 400:
            try:
                message = response.json().get("error") or response.text
            except ValueError:
                message = response.text
            error = ApiError(f"{method} {path}: {response.status_code}: {message}", response.status_code)
            if response.status_code == 429:
                error.retry_after = float(response.headers.get("Retry-After") or 1)
            raise error
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def get_text(self, path: str, **params: Any) -> str:
        return self._call("GET", path, params={k: v for k, v in params.items() if v is not None}).text

    def put(self, path: str, body: Any) -> httpx.Response:
        return self._call("PUT", path, json=body)

    def post(self, path: str, body: Any, timeout: float | None = None) -> httpx.Response:
        return self._call("POST", path, json=body, timeout=timeout)

    # people
    def me(self) -> dict[str, Any]:
        return self.get("/api/me")

    def submit(
        self,
        problem: str,
        solution: Solution,
        device_kind: str,
        mode: str,
        client_key: str | None = None,
        contest: str | None = None,
    ) -> dict[str, Any]:
        """Queue a solution; with client_key, a retry of the same key returns the same submission;
        with contest, the run is entered into that contest."""
        body = {
            "problem": problem,
            "device_kind": device_kind,
            "mode": mode,
            "solution": {
                "name": solution.name,
                "manifest": solution.manifest.model_dump(mode="json"),
                "sources": solution.sources,
            },
        }
        if client_key is not None:
            body["client_key"] = client_key
        if contest is not None:
            body["contest"] = contest
        return self.post("/api/submissions", body).json()

    def submissions(self, ids: list[int]) -> list[dict[str, Any]]:
        """Several submissions at once (without their Evaluation records)."""
        found: list[dict[str, Any]] = []
        for start in range(0, len(ids), 200):
            chunk = ids[start : start + 200]
            found += self.get("/api/submissions", ids=",".join(map(str, chunk)), limit=len(chunk))
        return found

    def submission(self, submission_id: int) -> dict[str, Any]:
        return self.get(f"/api/submissions/{submission_id}")

    def invite(self, role: str, uses: int, days: float | None, note: str) -> dict[str, Any]:
        return self.post("/api/invites", {"role": role, "uses": uses, "expires_in_days": days, "note": note}).json()

    def cancel(self, submission_id: int) -> dict[str, Any]:
        return self.post(f"/api/submissions/{submission_id}/cancel", {}).json()

    def watch(self, submission_id: int) -> Iterator[dict[str, Any]]:
        """The submission each time its status changes, until it is done (server-sent events;
        polled every few seconds instead when the server has no stream to spare: 429 or 503)."""
        try:
            with self.http.stream(
                "GET", f"{self.server}/api/submissions/{submission_id}/events", timeout=httpx.Timeout(30.0, read=60.0)
            ) as response:
                if response.status_code in (429, 503):
                    response.read()
                    busy = True
                elif response.status_code >= 400:
                    response.read()
                    raise ApiError(
                        f"watching submission {submission_id}: {response.status_code}: {response.text}",
                        response.status_code,
                    )
                else:
                    busy = False
                    for event, data in parse_events(response.iter_lines()):
                        if event == "status":
                            yield data
                        elif event == "done":
                            return
        except httpx.HTTPError as exc:
            server = self.server
            self._next_server()
            raise ApiError(f"lost the connection to {server}: {exc}") from None
        if busy:
            yield from self._poll(submission_id)

    def _poll(self, submission_id: int, every_s: float = 2.0) -> Iterator[dict[str, Any]]:
        last = None
        while True:
            current = self.submission(submission_id)
            if (current["status"], current.get("queue_position")) != last:
                last = (current["status"], current.get("queue_position"))
                yield current
            if current.get("done"):
                return
            time.sleep(every_s)

    def leaderboard(self, problem: str, device_kind: str) -> dict[str, Any]:
        return self.get("/api/leaderboard", problem=problem, device_kind=device_kind)

    # runners
    def hello(self, name: str, hostname: str, version: str, devices: list[DeviceSlot]) -> int:
        body = {
            "name": name,
            "hostname": hostname,
            "version": version,
            "devices": [d.model_dump() for d in devices],
            "protocol": PROTOCOL_VERSION,
        }
        return self.post("/api/runner/hello", body).json()["runner_id"]

    def runners(self) -> list[dict[str, Any]]:
        return self.get("/api/runners")

    def claim(self, runner_id: int, device_kinds: list[str], wait_s: float, device: str = "") -> TypedJob | None:
        """A job leased to this runner (None: none came within wait_s), typed by its kind."""
        body = {
            "runner_id": runner_id,
            "device_kinds": device_kinds,
            "wait_s": wait_s,
            "device": device,
            "protocol": PROTOCOL_VERSION,
        }
        response = self.post("/api/runner/claim", body, timeout=wait_s + 30)
        return None if response.status_code == 204 else TYPED_JOB.validate_json(response.content)

    def heartbeat(self, runner_id: int, leases: dict[int, str], devices: list[DeviceSlot] | None = None) -> list[int]:
        body: dict[str, Any] = {"runner_id": runner_id, "leases": {str(k): v for k, v in leases.items()}}
        if devices is not None:
            body["devices"] = [d.model_dump() for d in devices]
        return self.post("/api/runner/heartbeat", body).json()["lost"]

    def post_result(
        self,
        job_id: int,
        lease_token: str,
        evaluation: Evaluation,
        runner_id: int | None = None,
        sample: SampleReport | None = None,
    ) -> dict[str, Any]:
        body = {"lease_token": lease_token, "evaluation": evaluation.model_dump(mode="json"), "runner_id": runner_id}
        if sample is not None:
            body["sample"] = sample.model_dump(mode="json")
        return self.post(f"/api/runner/jobs/{job_id}/result", body).json()

    def release(self, job_id: int, lease_token: str, error: str = "", harness_failed: bool = False) -> None:
        body = {"lease_token": lease_token, "error": error, "harness_failed": harness_failed}
        self.post(f"/api/runner/jobs/{job_id}/release", body)
