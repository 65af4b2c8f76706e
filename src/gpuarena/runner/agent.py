"""The runner agent: one worker thread per device slot claims jobs for that slot's kind, runs
each in its own process (`gpuarena.runner.execute`), and posts the Evaluation. A heartbeat
thread renews the leases of running jobs and stops jobs whose lease was lost. On shutdown it
stops claiming, stops running jobs and gives their leases back, so they run again elsewhere
at once instead of waiting for the lease to expire."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpuarena import __version__
from gpuarena.client import ApiError, Client
from gpuarena.harness.records import Evaluation
from gpuarena.runner.execute import ExecuteRequest
from gpuarena.service.schemas import ClaimedJob, DeviceSlot
from gpuarena.solutions.build import cache_dir

log = logging.getLogger("gpuarena.runner")
CLAIM_WAIT_S = 5.0
STOP_GRACE_S = 10.0


@dataclass
class Running:
    job: ClaimedJob
    process: subprocess.Popen | None = None
    lost: bool = False


@dataclass
class RunnerConfig:
    name: str = field(default_factory=socket.gethostname)
    slots: list[DeviceSlot] = field(default_factory=list)
    budget_s: float = 2.0
    """Timing budget per workload."""
    timeout_s: float = 600.0
    work_dir: Path = field(default_factory=lambda: cache_dir() / "runner")


class Runner:
    def __init__(self, client: Client, config: RunnerConfig):
        self.client, self.config = client, config
        self.stopping = threading.Event()
        self.running: dict[int, Running] = {}
        self.lock = threading.Lock()
        self.runner_id: int | None = None
        self.jobs_done = 0

    # lifecycle
    def run(self) -> None:
        """Serve until stop() is called (or SIGTERM/SIGINT when run as `gpuarena runner`)."""
        self.runner_id = self._hello()
        threads = [threading.Thread(target=self._slot_loop, args=(slot,), name=f"slot-{slot.device}", daemon=True)
                   for slot in self.config.slots if slot.healthy]
        threads.append(threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True))
        for thread in threads:
            thread.start()
        self.stopping.wait()
        self._shutdown()
        for thread in threads:
            thread.join(timeout=CLAIM_WAIT_S + STOP_GRACE_S + 5)

    def stop(self) -> None:
        self.stopping.set()

    def _hello(self) -> int:
        delay = 0.5
        while True:
            try:
                return self.client.hello(self.config.name, socket.gethostname(), __version__, self.config.slots)
            except ApiError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
                if self.stopping.wait(delay):
                    raise
                log.warning("server not reachable yet (%s); retrying", exc)
                delay = min(delay * 2, 10.0)

    def _shutdown(self) -> None:
        with self.lock:
            running = list(self.running.values())
        for item in running:
            self._terminate(item)
            try:
                self.client.release(item.job.job_id, item.job.lease_token)
                log.info("gave back job %s", item.job.job_id)
            except ApiError as exc:
                log.warning("could not give back job %s: %s", item.job.job_id, exc)

    # work
    def _slot_loop(self, slot: DeviceSlot) -> None:
        assert self.runner_id is not None
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                job = self.client.claim(self.runner_id, [slot.kind], wait_s=CLAIM_WAIT_S)
                backoff = 0.5
            except ApiError as exc:
                log.warning("claim failed on %s: %s", slot.device, exc)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            if job is None:
                continue
            if self.stopping.is_set():
                self._quietly(self.client.release, job.job_id, job.lease_token)
                return
            self._run_job(slot, job)

    def _run_job(self, slot: DeviceSlot, job: ClaimedJob) -> None:
        item = Running(job=job)
        with self.lock:
            self.running[job.job_id] = item
        try:
            evaluation, error = self._execute(slot, item)
            if item.lost or self.stopping.is_set():
                return  # the lease is gone, or _shutdown gives it back
            if evaluation is not None:
                self._post(job, evaluation)
            else:
                self._quietly(self.client.release, job.job_id, job.lease_token, error or "the harness failed")
        finally:
            with self.lock:
                self.running.pop(job.job_id, None)

    def _execute(self, slot: DeviceSlot, item: Running) -> tuple[Evaluation | None, str]:
        job = item.job
        folder = self.config.work_dir / f"job-{job.job_id}-{job.lease_token[:8]}"
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / "evaluation.json"
        env = dict(os.environ)
        device = "cpu"
        if slot.device.startswith("cuda"):
            env["CUDA_VISIBLE_DEVICES"] = slot.device.partition(":")[2] or "0"
            device = "cuda"
        request = ExecuteRequest(problem=job.problem, solution=job.solution, device=device, mode=job.mode,
                                 seed=job.seed, timeout_s=self.config.timeout_s, budget_s=self.config.budget_s,
                                 cache=str(self.config.work_dir / "problems"))
        log_path = folder / "execute.log"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen([sys.executable, "-m", "gpuarena.runner.execute", str(out)],
                                       stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
            item.process = process
            assert process.stdin is not None
            try:
                process.stdin.write(request.model_dump_json().encode())
                process.stdin.close()
            except BrokenPipeError:
                pass
            deadline = time.monotonic() + self.config.timeout_s + 120
            while process.poll() is None:
                if item.lost or self.stopping.is_set() or time.monotonic() > deadline:
                    self._terminate(item)
                    break
                time.sleep(0.1)
        try:
            if out.is_file() and process.returncode == 0:
                return Evaluation.model_validate_json(out.read_text()), ""
            tail = log_path.read_text(errors="replace")[-2000:]
            return None, f"the harness exited with {process.returncode}: {tail}"
        except ValueError as exc:
            return None, f"unreadable evaluation: {exc}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _post(self, job: ClaimedJob, evaluation: Evaluation) -> None:
        """Post the result, retrying through network trouble until it lands or the lease is gone."""
        delay = 0.5
        while True:
            try:
                self.client.post_result(job.job_id, job.lease_token, evaluation)
                self.jobs_done += 1
                return
            except ApiError as exc:
                if exc.status is not None and exc.status < 500:
                    log.warning("result for job %s refused: %s", job.job_id, exc)
                    return
                if self.stopping.wait(delay):
                    return
                delay = min(delay * 2, 10.0)

    def _terminate(self, item: Running) -> None:
        process = item.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    # leases
    def _heartbeat_loop(self) -> None:
        assert self.runner_id is not None
        interval = 5.0
        while not self.stopping.wait(interval):
            with self.lock:
                leases = {job_id: item.job.lease_token for job_id, item in self.running.items()}
            try:
                lost = self.client.heartbeat(self.runner_id, leases)
                interval = min(5.0, min((i.job.lease_s for i in self.running.values()), default=20.0) / 4)
            except ApiError as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            for job_id in lost:
                with self.lock:
                    item = self.running.get(job_id)
                if item is not None:
                    log.warning("lost the lease on job %s; stopping it", job_id)
                    item.lost = True

    @staticmethod
    def _quietly(call, *args) -> None:  # type: ignore[no-untyped-def]
        try:
            call(*args)
        except ApiError as exc:
            log.warning("%s failed: %s", getattr(call, "__name__", "call"), exc)
