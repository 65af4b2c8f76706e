"""A small client for the gpuarena JSON API, used by the CLI and by runners."""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx

from gpuarena.errors import GpuarenaError
from gpuarena.harness.records import Evaluation
from gpuarena.service.schemas import ClaimedJob, DeviceSlot
from gpuarena.solutions.model import Solution


class ApiError(GpuarenaError):
    def __init__(self, message: str, status: int | None = None):
        self.status = status
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
    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0):
        if not server.startswith(("http://", "https://")):
            raise GpuarenaError(f"server {server!r}: give a URL such as http://localhost:8000")
        self.server = server.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, timeout: float | None = None, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, timeout=timeout or self.http.timeout, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach {self.server}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            try:
                message = response.json().get("error") or response.text
            except ValueError:
                message = response.text
            raise ApiError(f"{method} {path}: {response.status_code}: {message}", response.status_code)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: Any, timeout: float | None = None) -> httpx.Response:
        return self._call("POST", path, json=body, timeout=timeout)

    # people
    def me(self) -> dict[str, Any]:
        return self.get("/api/me")

    def submit(self, problem: str, solution: Solution, device_kind: str, mode: str) -> dict[str, Any]:
        body = {"problem": problem, "device_kind": device_kind, "mode": mode,
                "solution": {"name": solution.name, "manifest": solution.manifest.model_dump(mode="json"),
                             "sources": solution.sources}}
        return self.post("/api/submissions", body).json()

    def submission(self, submission_id: int) -> dict[str, Any]:
        return self.get(f"/api/submissions/{submission_id}")

    def watch(self, submission_id: int) -> Iterator[dict[str, Any]]:
        """The submission each time its status changes, until it is done (server-sent events)."""
        try:
            with self.http.stream("GET", f"/api/submissions/{submission_id}/events",
                                  timeout=httpx.Timeout(30.0, read=60.0)) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError(f"watching submission {submission_id}: {response.status_code}: {response.text}",
                                   response.status_code)
                for event, data in parse_events(response.iter_lines()):
                    if event == "status":
                        yield data
                    elif event == "done":
                        return
        except httpx.HTTPError as exc:
            raise ApiError(f"lost the connection to {self.server}: {exc}") from None

    def leaderboard(self, problem: str, device_kind: str) -> dict[str, Any]:
        return self.get("/api/leaderboard", problem=problem, device_kind=device_kind)

    # runners
    def hello(self, name: str, hostname: str, version: str, devices: list[DeviceSlot]) -> int:
        body = {"name": name, "hostname": hostname, "version": version, "devices": [d.model_dump() for d in devices]}
        return self.post("/api/runner/hello", body).json()["runner_id"]

    def claim(self, runner_id: int, device_kinds: list[str], wait_s: float) -> ClaimedJob | None:
        response = self.post("/api/runner/claim", {"runner_id": runner_id, "device_kinds": device_kinds,
                                                   "wait_s": wait_s}, timeout=wait_s + 30)
        return None if response.status_code == 204 else ClaimedJob.model_validate(response.json())

    def heartbeat(self, runner_id: int, leases: dict[int, str], devices: list[DeviceSlot] | None = None) -> list[int]:
        body: dict[str, Any] = {"runner_id": runner_id, "leases": {str(k): v for k, v in leases.items()}}
        if devices is not None:
            body["devices"] = [d.model_dump() for d in devices]
        return self.post("/api/runner/heartbeat", body).json()["lost"]

    def post_result(self, job_id: int, lease_token: str, evaluation: Evaluation) -> dict[str, Any]:
        return self.post(f"/api/runner/jobs/{job_id}/result",
                         {"lease_token": lease_token, "evaluation": evaluation.model_dump(mode="json")}).json()

    def release(self, job_id: int, lease_token: str, error: str = "") -> None:
        self.post(f"/api/runner/jobs/{job_id}/release", {"lease_token": lease_token, "error": error})
