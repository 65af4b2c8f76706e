"""The runner agent: one worker per device slot (a thread that claims jobs for that slot's
kind and runs each in its own process, `gpuarena.runner.execute`, pinned to the slot's GPU
with CUDA_VISIBLE_DEVICES), which posts the Evaluation. A heartbeat thread renews the leases
of running jobs, stops jobs whose lease was lost and reports the slots' health. A health
thread checks each slot (the device is still listed; a GPU runs a tiny CUDA op in a pinned
child process) when the runner starts, every health_interval_s while the slot is idle, and
after a job's harness fails: a slot that fails is drained (claims no more jobs; its running
job is stopped and given back) and reported to the server, which shows it in GET
/api/runners. On shutdown it stops claiming, stops running jobs and gives their leases back,
so they run again elsewhere at once instead of waiting for the lease to expire."""

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuarena import __version__
from gpuarena.cache import cache_dir
from gpuarena.client import ApiError, Client
from gpuarena.contracts.device import is_gpu, pinning
from gpuarena.contracts.records import Evaluation
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.dataset.sample import SampleReport
from gpuarena.harness import phases
from gpuarena.runner.devices import health_check
from gpuarena.runner.execute import SAMPLE_REPORT, SERVE_ENV, ExecuteRequest
from gpuarena.runner.self_tests import failed, run_self_tests
from gpuarena.runner_wire import TypedJob

log = logging.getLogger("gpuarena.runner")
CLAIM_WAIT_S = 5.0
STOP_GRACE_S = 10.0


@dataclass
class Running:
    job: TypedJob
    slot: DeviceSlot
    process: subprocess.Popen | None = None
    lost: bool = False
    sample: SampleReport | None = None
    """A sample's check: its report, posted with the Evaluation."""


@dataclass
class RunnerConfig:
    name: str = field(default_factory=socket.gethostname)
    slots: list[DeviceSlot] = field(default_factory=list)
    budget_s: float = 2.0
    """Timing budget per workload."""
    timeout_s: float = 600.0
    work_dir: Path = field(default_factory=lambda: cache_dir() / "runner")
    list_devices: Callable[[], list[DeviceSlot]] | None = None
    """Lists the host's devices again, for the health check (a slot no longer listed has
    disappeared); None: slots cannot disappear."""
    health_interval_s: float = 60.0
    """How often idle slots are checked again (0: only at start and after a harness failure)."""
    prewarm: bool = True
    """Start each slot's next job process ahead (Python, torch and the harness imported,
    nothing on the device), so a job does not wait for those imports: on a GPU slot while the
    current job runs; on the CPU, where a job's timing shares the cores, once it has ended."""
    serve: bool | None = None
    """Kernel jobs go to a job process that stays for the slot's next one (execute.serve_jobs: the
    harness's Evaluator, so workers wait with their CUDA contexts made and the PM sampler is kept,
    as `gpuarena run-many` judges); each job still has a worker of its own. None: on GPU slots
    only (with prewarm). A serving process that dies is replaced by a fresh one."""
    self_test: bool = False
    """Run the languages' self-tests at start, once per device kind, and show them in the slots'
    software (runner/self_tests.py); `gpuarena runner` turns it on unless --no-self-test."""


@dataclass
class Spare:
    """A job process started ahead, waiting on stdin for its job."""

    process: subprocess.Popen
    log_path: Path
    serving: bool = False
    """Started with execute.SERVE_ENV: it judges kernel jobs one after another (RunnerConfig.serve)."""
    jobs: int = 0
    """Jobs it has judged and stayed for."""


class Runner:
    def __init__(self, client: Client, config: RunnerConfig):
        self.client, self.config = client, config
        self.stopping = threading.Event()
        self.running: dict[int, Running] = {}
        self.lock = threading.Lock()
        self.runner_id: int | None = None
        self.jobs_done = 0
        self.wake_heartbeat = threading.Event()
        self.health_lock = threading.Lock()
        self.spares: dict[str, Spare] = {}

    # lifecycle
    def run(self) -> None:
        """Serve until stop() is called (or SIGTERM/SIGINT when run as `gpuarena runner`)."""
        self._check_health(busy=set())
        if self.config.self_test:
            run_self_tests(self.config.slots)
        self.runner_id = self._hello()
        threads = [
            threading.Thread(target=self._slot_loop, args=(slot,), name=f"slot-{slot.device}", daemon=True)
            for slot in self.config.slots
            if slot.healthy
        ]
        threads.append(threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True))
        if self.config.health_interval_s > 0:
            threads.append(threading.Thread(target=self._health_loop, name="health", daemon=True))
        for thread in threads:
            thread.start()
        self.stopping.wait()
        self._shutdown()
        for thread in threads:
            thread.join(timeout=CLAIM_WAIT_S + STOP_GRACE_S + 5)

    def stop(self) -> None:
        self.stopping.set()
        self.wake_heartbeat.set()

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
            spares, self.spares = list(self.spares.values()), {}
        for spare in spares:
            self._kill_spare(spare)
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
        while not self.stopping.is_set() and slot.healthy:
            try:
                job = self.client.claim(self.runner_id, [slot.kind], wait_s=CLAIM_WAIT_S, device=slot.device)
                backoff = 0.5
            except ApiError as exc:
                if not self.stopping.is_set():  # a server going away as we stop is no news
                    log.warning("claim failed on %s: %s", slot.device, exc)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            if job is None:
                continue
            if self.stopping.is_set() or not slot.healthy:
                self._quietly(self.client.release, job.job_id, job.lease_token)  # never started: not an attempt
                return
            self._run_job(slot, job)
        with self.lock:
            spare = self.spares.pop(slot.device, None)
        if spare is not None:
            self._kill_spare(spare)
        if not slot.healthy:
            log.error("%s drained: %s", slot.device, slot.reason)

    def _run_job(self, slot: DeviceSlot, job: TypedJob) -> None:
        item = Running(job=job, slot=slot)
        if reason := failed(slot, job.solution.manifest.language):
            log.warning("job %s is in %s, whose self-test %s", job.job_id, job.solution.manifest.language, reason)
        with self.lock:
            self.running[job.job_id] = item
        try:
            evaluation, error = self._execute(slot, item)
            if item.lost or self.stopping.is_set():
                return  # the lease is gone, or _shutdown gives it back
            if evaluation is None and slot.healthy:
                # the harness itself failed: is it the device?
                reason = health_check(slot, self._present())
                if reason:
                    self._drain(slot, reason)
            if not slot.healthy:
                error = f"device {slot.device} failed its health check during the job: {slot.reason}"
                self._quietly(self.client.release, job.job_id, job.lease_token, error)
            elif evaluation is not None:
                self._post(job, evaluation, item.sample)
            else:
                self._quietly(self.client.release, job.job_id, job.lease_token, error or "the harness failed", True)
        finally:
            with self.lock:
                self.running.pop(job.job_id, None)

    def _execute(self, slot: DeviceSlot, item: Running) -> tuple[Evaluation | None, str]:
        job = item.job
        folder = self.config.work_dir / f"job-{job.job_id}-{job.lease_token[:8]}"
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / "evaluation.json"
        device, pin = pinning(slot)
        # GPUARENA_JOB_DEVICE: the job process starts its worker before the job arrives, and a
        # CPU slot's worker must not see the GPUs
        env = {**os.environ, **pin, "GPUARENA_RUNNER_PID": str(os.getpid()), "GPUARENA_JOB_DEVICE": device}
        request = ExecuteRequest(
            kind=job.kind,  # told by the service; the job process runs the kind's entry (execute.RUNS)
            problem=job.problem,
            solution=job.solution,
            device=device,
            mode=job.mode,
            seed=job.seed,
            timeout_s=self.config.timeout_s,
            budget_s=self.config.budget_s,
            cache=str(self.config.work_dir / "problems"),
            out=str(out),
        )
        serving = job.kind == "kernel" and self._serves(slot)
        spare = self._take_spare(slot, env, serving)
        line = request.model_dump_json().encode() + b"\n"
        stopped = self._hand(item, spare, line, out, env)
        if spare.jobs and not stopped and spare.process.returncode is not None and not out.is_file():
            # a kept process that ended on its own without the job's result (killed while it waited,
            # say): the job goes to a fresh one, once
            log.warning("the serving job process on %s had died (%s)", slot.device, spare.process.returncode)
            self._kill_spare(spare)
            spare = self._take_spare(slot, env, serving)
            self._hand(item, spare, line, out, env)
        process, log_path = spare.process, spare.log_path
        kept = serving and process.poll() is None and not self.stopping.is_set() and slot.healthy
        if kept:  # it waits for the slot's next job, its next workers already starting
            spare.jobs += 1
            self._keep_spare(slot, spare)
        elif self.config.prewarm and (serving or not is_gpu(slot)) and not self.stopping.is_set() and slot.healthy:
            self._start_spare(slot, env)
        try:
            if out.is_file() and (kept or process.returncode == 0):
                if (report := folder / SAMPLE_REPORT).is_file():
                    item.sample = SampleReport.model_validate_json(report.read_text())
                return Evaluation.model_validate_json(out.read_text()), ""
            tail = log_path.read_text(errors="replace")[-2000:]
            return None, f"the harness exited with {process.returncode}: {tail}"
        except ValueError as exc:
            return None, f"unreadable evaluation: {exc}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if kept:  # its log holds the next job's lines only
                os.truncate(log_path, 0)
            else:
                log_path.unlink(missing_ok=True)

    # job processes
    def _hand(self, item: Running, spare: Spare, line: bytes, out: Path, env: dict[str, str]) -> bool:
        """Give the job to the process and wait until it has written `out` (a serving one) or
        ended, or the job must stop (lost, the runner stopping, the slot drained, too long):
        whether it was stopped so."""
        process, slot, serving = spare.process, item.slot, spare.serving
        item.process = process
        assert process.stdin is not None
        try:
            process.stdin.write(line)
            process.stdin.flush() if serving else process.stdin.close()
        except BrokenPipeError:
            pass
        if self.config.prewarm and is_gpu(slot) and not serving and not self.stopping.is_set():
            self._start_spare(slot, env)  # its imports while this job runs
        # the run's own limit, its worker's start-up limit (harness START_UP_LIMIT_S, 120 s) and room to report
        deadline = time.monotonic() + self.config.timeout_s + 240
        while process.poll() is None and not (serving and out.is_file()):
            if item.lost or self.stopping.is_set() or not slot.healthy or time.monotonic() > deadline:
                self._terminate(item)
                return True
            time.sleep(0.02 if serving else 0.1)
        return False

    def _serves(self, slot: DeviceSlot) -> bool:
        """Whether the slot's kernel jobs go to a serving job process (RunnerConfig.serve)."""
        serve = self.config.serve
        return serve if serve is not None else self.config.prewarm and is_gpu(slot)

    def _spawn(self, slot: DeviceSlot, env: dict[str, str], serving: bool = False) -> Spare:
        self.config.work_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.config.work_dir / f"execute-{slot.device.replace(':', '')}-{os.urandom(6).hex()}.log"
        if serving:
            env = {**env, SERVE_ENV: "1"}
        with open(log_path, "ab") as log_file:  # appending: a kept process's log is emptied between jobs
            process = subprocess.Popen(
                [sys.executable, "-m", "gpuarena.runner.execute"],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return Spare(process, log_path, serving)

    def _start_spare(self, slot: DeviceSlot, env: dict[str, str]) -> None:
        self._keep_spare(slot, self._spawn(slot, env, self._serves(slot)))

    def _keep_spare(self, slot: DeviceSlot, spare: Spare) -> None:
        """`spare` waits for the slot's next job (one waiting before is stopped)."""
        with self.lock:
            old, self.spares[slot.device] = self.spares.get(slot.device), spare
        if old is not None:
            self._kill_spare(old)
        if self.stopping.is_set():  # raced with shutdown, which has already stopped the others
            with self.lock:
                if self.spares.get(slot.device) is spare:
                    del self.spares[slot.device]
            self._kill_spare(spare)

    def _take_spare(self, slot: DeviceSlot, env: dict[str, str], serving: bool = False) -> Spare:
        """The slot's process started ahead, if it still waits and serves as the job needs; else a new one."""
        with self.lock:
            spare = self.spares.pop(slot.device, None)
        if spare is not None and spare.process.poll() is None and spare.serving == serving:
            return spare
        if spare is not None:  # it died waiting (its log says why), or serves otherwise: start afresh
            if spare.process.poll() is not None:
                log.warning(
                    "the job process started ahead on %s had exited (%s)", slot.device, spare.process.returncode
                )
            self._kill_spare(spare)
        return self._spawn(slot, env, serving)

    def _kill_spare(self, spare: Spare) -> None:
        self._stop_process(spare.process)
        spare.log_path.unlink(missing_ok=True)

    def _post(self, job: TypedJob, evaluation: Evaluation, sample: SampleReport | None = None) -> None:
        """Post the result, retrying through network trouble until it lands or the lease is gone."""
        delay = 0.5
        while True:
            try:
                self.client.post_result(job.job_id, job.lease_token, evaluation, self.runner_id, sample)
                self.jobs_done += 1
                log.info(
                    "job %s (submission %s): %s in %s",
                    job.job_id,
                    job.submission_id,
                    evaluation.status.value,
                    phases.summary(evaluation.duration_s, evaluation.phases),
                )
                return
            except ApiError as exc:
                if exc.status is not None and exc.status < 500:
                    log.warning("result for job %s refused: %s", job.job_id, exc)
                    return
                if self.stopping.wait(delay):
                    return
                delay = min(delay * 2, 10.0)

    def _terminate(self, item: Running) -> None:
        if item.process is not None:
            self._stop_process(item.process)

    @staticmethod
    def _stop_process(process: subprocess.Popen) -> None:
        """SIGTERM to the job's process group, SIGKILL after STOP_GRACE_S."""
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    # health
    def _present(self) -> set[str] | None:
        if self.config.list_devices is None:
            return None
        try:
            return {slot.device for slot in self.config.list_devices()}
        except Exception as exc:  # listing failed (nvidia-smi hung, the file is half written): judge nothing
            log.warning("could not list this host's devices: %s", exc)
            return None

    def _check_health(self, busy: set[str]) -> None:
        """Check every healthy slot; a busy one (running a job) only for being listed, so the
        check never runs on a GPU in the middle of someone's timing."""
        from concurrent.futures import ThreadPoolExecutor

        def check(slot: DeviceSlot) -> str:
            if slot.device in busy:
                return health_check(slot, present) if present is not None and slot.device not in present else ""
            return health_check(slot, present)

        with self.health_lock:
            present = self._present()
            slots = [slot for slot in self.config.slots if slot.healthy]
            with ThreadPoolExecutor(max_workers=max(1, len(slots))) as pool:  # GPUs in parallel
                reasons = list(pool.map(check, slots))
            for slot, reason in zip(slots, reasons):
                if reason:
                    self._drain(slot, reason)

    def _drain(self, slot: DeviceSlot, reason: str) -> None:
        """Claim nothing more on slot, stop its running job, and tell the server now."""
        if not slot.healthy:
            return
        slot.healthy, slot.reason = False, reason
        log.error("draining %s (%s): %s", slot.device, slot.kind, reason)
        self.wake_heartbeat.set()

    def _health_loop(self) -> None:
        while not self.stopping.wait(self.config.health_interval_s):
            with self.lock:
                busy = {item.slot.device for item in self.running.values()}
            self._check_health(busy)

    # leases
    def _heartbeat_loop(self) -> None:
        assert self.runner_id is not None
        interval = 5.0
        while True:
            self.wake_heartbeat.wait(interval)
            self.wake_heartbeat.clear()
            if self.stopping.is_set():
                return
            with self.lock:
                leases = {job_id: item.job.lease_token for job_id, item in self.running.items()}
            try:
                lost = self.client.heartbeat(self.runner_id, leases, self.config.slots)
                interval = min(5.0, min((i.job.lease_s for i in self.running.values()), default=20.0) / 4)
            except ApiError as exc:
                if not self.stopping.is_set():
                    log.warning("heartbeat failed: %s", exc)
                interval = 1.0  # again soon: the client has moved on to the next server, and leases run out
                continue
            for job_id in lost:
                with self.lock:
                    item = self.running.get(job_id)
                if item is not None:
                    log.warning("lost the lease on job %s (cancelled, expired or pre-empted); stopping it", job_id)
                    item.lost = True

    @staticmethod
    def _quietly(call: Callable[..., object], *args: object) -> None:
        try:
            call(*args)
        except ApiError as exc:
            log.warning("%s failed: %s", getattr(call, "__name__", "call"), exc)
