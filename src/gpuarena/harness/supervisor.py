"""The supervisor: owns the problem, seeds, inputs, reference outputs, verdicts and statistics.

It runs in the caller's process. The solution runs in a worker process that sees only the
shared input buffers and writes into shared output buffers; everything the worker says is
raw data that the supervisor checks.
"""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import cast

import torch

from gpuarena.contracts import messages
from gpuarena.contracts.records import Environment, Evaluation, Status, WorkloadResult
from gpuarena.errors import GpuarenaError
from gpuarena.harness import held_memory, kernel_duration, memory_plan
from gpuarena.harness.calibration import ProcessExtra, calibrate
from gpuarena.harness.correctness import check_correctness
from gpuarena.harness.device import device_audit
from gpuarena.harness.device.backend import Backend, backend_for
from gpuarena.harness.device.timing import Timer
from gpuarena.harness.failure import RunFailure, worker_failure
from gpuarena.harness.launch import allocator
from gpuarena.harness.launch.ahead import DeviceAhead
from gpuarena.harness.launch.kept_caches import keep_caches, restore_caches
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.launch.started import StartedWorker, _switch
from gpuarena.harness.measure import TimingPlan, measure_workload
from gpuarena.harness.options import PUBLIC_SEED, RunOptions
from gpuarena.harness.phases import BUILD, CORRECTNESS, KERNEL_DURATION, START_UP, TEARDOWN, TIMING, Phases
from gpuarena.harness.redact import redact
from gpuarena.harness.session import WorkloadSession
from gpuarena.harness.stats import weighted_geomean
from gpuarena.harness.transport import SharedArena
from gpuarena.harness.warm import Warm
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload
from gpuarena.solutions import runtimes
from gpuarena.solutions.model import Solution

Progress = Callable[[str], None]

START_UP_LIMIT_S = 120.0
"""How long the worker's start-up may take (no solution code runs in it: a slow start is a
busy machine's, not the solution's); the run's time limit starts when it is done."""


class Supervisor:
    def __init__(
        self,
        problem: Problem,
        solution: Solution,
        options: RunOptions,
        progress: Progress | None = None,
        worker: StartedWorker | None = None,
        warm: Warm | None = None,
        ahead: DeviceAhead | None = None,
    ):
        self.problem, self.solution, self.options = problem, solution, options
        self.convention = solution.manifest.convention_for(problem.spec.convention)
        self.started_worker = worker
        """Set up ahead by the caller, used once; None: the run starts its own."""
        self.ahead = ahead
        """The sampler and nvidia-smi's reading, started before torch was imported (launch/ahead.py)."""
        self.warm = warm
        """Kept by a long-lived caller between jobs (harness/warm.py): the sampler, the GPU's lock
        held while timing, the worker's teardown in the background. None: a run of its own."""
        self.prepared = False
        """Whether the worker made its context and timer on this device before the run."""
        self.progress = progress or (lambda text: None)
        self.backend: Backend = backend_for(torch.device(options.device))
        """Every device-specific step of the run (harness/device/backend.py)."""
        self.device = self.backend.pin(torch.device(options.device))
        if options.mode == "ranked":
            self.seed = options.seed if options.seed is not None else secrets.randbits(62)
        else:
            self.seed = PUBLIC_SEED if options.seed is None else options.seed
        # which timed calls are checked, and the timed rounds' inputs, are unpredictable in
        # every mode (the public seed makes the correctness trials reproducible, nothing more)
        self.rng: random.Random = random.SystemRandom()
        self.fresh_seed = self.seed if options.mode == "ranked" else secrets.randbits(62)
        self.deadline = 0.0
        self.peaks: dict[str, float] | None = None
        self.timer: Timer | None = None
        """Times the reference, with the method the supervisor chose for both sides (_timer)."""
        self.process_extra: ProcessExtra | None = None
        """On the CPU: what the worker's process adds to the harness's CPU time (calibration.py)."""
        self.prepared_reply: messages.Prepared | None = None
        """The worker's `prepare` reply: its harness's own word, before any solution code ran."""
        self.details: list[str] = []
        """Tracebacks and other detail that belongs in the log, not the verdict."""
        self.phases = Phases()
        """Wall time per phase (a run starts a fresh one)."""
        self.environment: Environment | None = None
        """This run's description of the machine (set at start-up)."""
        self._sampler: device_audit.DeviceSampler | None = None
        self.sampler_missing = ""
        """Why there is no device sampler for the audit, once one was sought."""
        self.sampler_lost = False
        """The sampler started in this run and could not start again later: the counters may
        be held by the solution (device_audit.py), so the audit must not be skipped."""
        self._sampler_started = False

    @property
    def sampler(self) -> device_audit.DeviceSampler | None:
        """The GPU's counters, read from a process of the supervisor's (device_audit.py):
        started on first use, held until released (release_sampler) or the run ends."""
        if self._sampler is None and not self.sampler_missing:
            off = self._audit_off()
            if off:
                self.sampler_missing = off
                return None
            if self.warm is not None:
                kept = self.warm.take_sampler()
            else:
                kept = self.ahead.take_sampler(self.device.index or 0) if self.ahead is not None else None
            if kept is not None:
                self._sampler, self._sampler_started = kept, True
                return kept
            binary, why = device_audit.build_sampler()
            if binary is None:
                self.sampler_missing = why
                return None
            try:
                self._sampler = device_audit.DeviceSampler(binary, self.device.index or 0)
                self._sampler_started = True
            except (device_audit.SamplerError, OSError) as exc:
                self.sampler_missing = f"the PM sampler could not start: {exc}"
                self.sampler_lost = self._sampler_started
        return self._sampler

    def _audit_off(self) -> str:
        """Why this run is not audited ("" when it is): the machine's switch, or the run's
        option, which a ranked run ignores."""
        if not _switch("GPUARENA_DEVICE_AUDIT", True):
            return "turned off (GPUARENA_DEVICE_AUDIT=0)"
        if not self.options.device_audit and self.options.mode != "ranked":
            return "turned off for this run (code the caller trusts)"
        return ""

    def release_sampler(self) -> None:
        """Quit the PM sampler: while it runs it holds the GPU's counters, and any other
        profiling session on the device (the range timer's) gets CUPTI_ERROR_HARDWARE_BUSY.
        The next audit starts another (0.6-0.8 s on an H100)."""
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None

    def workloads(self) -> list[Workload]:
        chosen = self.problem.spec.workloads_for(self.device.type)
        if self.options.workloads:
            names = set(self.options.workloads)
            unknown = names - {w.name for w in self.problem.spec.workloads}
            if unknown:
                raise RunFailure(Status.REJECTED, f"unknown workload(s): {', '.join(sorted(unknown))}")
            chosen = [w for w in self.problem.spec.workloads if w.name in names]
        return chosen

    def run(self) -> Evaluation:
        started = time.monotonic()
        allocator.steady()  # the worker's policy: the reference's frees cost what the solution's do
        self.deadline = started + START_UP_LIMIT_S  # then the solution's own limit (_run)
        record = self.solution.record(self.problem.id, str(self.device), self.options.mode, status=Status.PASSED)
        self.phases = Phases()
        try:
            with self.phases(START_UP):
                ready = self._start_up(record)
            try:
                self._run_with(ready, record)
            finally:
                with self.phases(TEARDOWN):  # the device's state after the run is read while the worker leaves
                    finish = threading.Thread(target=self.backend.finish, args=(record.environment, self.device))
                    finish.start()
                    if self.warm is not None and ready.process.init_pid is not None:
                        # while the next job starts; never while one times. Unsandboxed, closing kills
                        # every child of ours that came after the worker, so it cannot overlap a job
                        self.warm.retire(ready.close)
                    else:
                        ready.close()
                    finish.join()
        except GpuarenaError:  # the caller's mistake (no such device, say): said to the caller
            raise
        except Exception as exc:  # the harness failed, not the solution: a record that says so
            import traceback

            record.status = Status.ERROR
            record.reason = redact(f"the harness failed: {type(exc).__name__}: {str(exc)[:300]}")
            record.log += redact("\n[gpuarena] " + traceback.format_exc())
        record.duration_s = round(time.monotonic() - started, 3)
        record.phases = self.phases.record()
        return record

    def _start_up(self, record: Evaluation) -> StartedWorker:
        """The device's description and peaks, the audit's sampler, and a worker started."""
        self.backend.activate(self.device)
        audited = self.backend.device_audit and self.options.mode != "test"
        # the device audit's sampler starts before any of the solution's code runs: whether
        # this GPU's counters can be read is the machine's answer, not the solution's. It
        # starts (about 0.6 s on an H100) while nvidia-smi describes the device (0.3 s)
        sampler = threading.Thread(target=lambda: self.sampler, name="gpuarena-sampler-start", daemon=True)
        if audited:
            sampler.start()
        try:
            state = self.ahead.state(self.device.index or 0) if self.ahead is not None else None
            record.environment = self.environment = self.backend.describe(self.device, state)
        finally:
            if audited:
                sampler.join()
        env = record.environment
        if self.options.peaks is not None:
            env.peaks = self.peaks = dict(self.options.peaks)
        elif self.options.mode != "test" and self.backend.accelerator:
            self.progress("measuring the device's peaks (once per device)")
            env.peaks = self.peaks = self.backend.peaks(self.device, env)
        ready, self.started_worker = self.started_worker, None
        wanted = (self._isolate_worker(), self.options.memory_limit_bytes, self.backend.accelerator)
        if ready is None or not ready.alive() or (ready.isolate, ready.memory_limit_bytes, ready.gpu) != wanted:
            if ready is not None:  # died while it waited, or set up with other guards
                ready.close()
            ready = StartedWorker(*wanted)
        ready.wait_prepared()
        self.prepared = (
            ready.prepared_on is not None
            and self.options.timing_method is None
            and torch.device(ready.prepared_on) == self.device
        )
        if self.prepared:
            self.prepared_reply = ready.prepared
        return ready

    def _timer(self, prepared: messages.Prepared) -> Timer:
        """The reference's timer, with the method the supervisor chose for both sides: the run's
        option, else the backend's best. The worker's harness said what its timer does in its
        `prepare` reply, before any solution code ran; a worker that cannot time that way (a
        sandbox that hides CUPTI, say) is the machine's failure, not a verdict, and nothing the
        worker says later changes the method (each `time` reply must carry it)."""
        chosen = self.backend.timing_method(self.options.timing_method)
        if prepared.method != chosen:
            raise RunFailure(
                Status.RUNTIME_ERROR,
                f"the worker's timer cannot time with {chosen} on {self.device} (it has "
                f"{prepared.method or 'nothing'}): the sandbox hides what that method needs",
            )
        # the reference starts each call from the caches the solution's calls start from
        worker_icache = prepared.icache_sweep
        timer = Timer(self.device, method=chosen, icache=worker_icache, backend=self.backend)
        if worker_icache and not timer.has_icache_sweep:
            self.details.append(
                "\n[gpuarena] the worker has an instruction-cache sweep and the supervisor none: "
                "the solution's calls start colder than the reference's\n"
            )
        return timer

    def gpu_alone(self) -> AbstractContextManager[None]:
        """While timing: no worker of ours starts or leaves the GPU (harness/warm.py)."""
        return self.warm.quiet() if self.warm is not None and self.backend.accelerator else nullcontext()

    def _isolate_worker(self) -> bool:
        if self.options.worker_isolation is not None:
            return self.options.worker_isolation
        return _switch("GPUARENA_WORKER_ISOLATION", True)

    def _run_with(self, started: StartedWorker, record: Evaluation) -> None:
        arena = SharedArena(
            self.device,
            owner=(started.user[0], started.user[1]) if started.user else None,
            by_fd=started.process.init_pid is not None,
        )
        with self.phases(BUILD):
            workdir_fd = restore_caches(started, self.solution.hash, self.details)
        try:
            self._run(started.process, arena, record)
        except RunFailure as failure:
            record.status, record.reason = Status(failure.status), failure.reason
            if failure.detail:
                record.log += failure.detail
        except Exception as exc:  # the supervisor always gives a verdict
            # what reaches the supervisor from the worker is the attack surface: a reply it could
            # not judge is not a pass, and the record says exactly what broke
            import traceback

            record.status = Status.REJECTED
            record.reason = (
                f"the supervisor could not judge the worker's replies ({type(exc).__name__}: {str(exc)[:300]})"
            )
            self.details.append("\n[gpuarena] " + traceback.format_exc())
        finally:
            with self.phases(TEARDOWN):
                started.process.stop()  # its output is complete; its process may still be leaving
                if workdir_fd is not None:
                    keep_caches(self.solution.hash, workdir_fd, started.process.cache_root.name, self.details)
                arena.close()
                if self._sampler is not None and self.warm is None:
                    if self._sampler.running:  # the timed workloads' one window (rounds_audit.begin);
                        try:  # a warm process keeps it on for its next job
                            self._sampler.stop()
                        except device_audit.SamplerError:
                            self._sampler.close()
                            self._sampler = None
                if self._sampler is not None:
                    if self.warm is not None:
                        self.warm.sampler = self._sampler
                    else:  # nothing reads it again: it leaves while the run ends
                        self._sampler.close(wait=False)
                    self._sampler = None
                record.log = started.process.read_log() + record.log + "".join(self.details)
                # people read logs and reasons; the judging machine's layout is not theirs to see
                record.log, record.reason = redact(record.log), redact(record.reason)
                for workload in record.workloads:
                    workload.reason = redact(workload.reason)

    def _run(self, worker: WorkerProcess, arena: SharedArena, record: Evaluation) -> None:
        workloads = self.workloads()
        if not workloads:
            raise RunFailure(
                Status.REJECTED, f"problem {self.problem.id} has no workloads for device kind {self.device.type}"
            )
        self.progress(f"building {self.solution.name} ({self.solution.manifest.language})")
        setup = messages.RunSetup(
            device=str(self.device),
            convention=self.convention,
            input_names=self.problem.input_names,
            output_names=self.problem.spec.outputs,
            method=self.options.timing_method,
            float_outputs_converted=self.problem.spec.tolerance_as_stated is not None,
        )
        if record.environment is not None:
            record.environment.worker_containment = worker.containment
        with self.phases(START_UP):  # the worker's own imports end here
            prepared: messages.Prepared | messages.Failure
            if self.prepared and self.prepared_reply is not None:
                prepared = self.prepared_reply
            else:
                request = messages.Prepare(setup=setup.model_copy(update=self.backend.worker_setup(str(self.device))))
                prepared = worker.request(request, self.deadline, "preparing the device")
        self.deadline = time.monotonic() + self.options.timeout_s  # the solution's time starts here
        if isinstance(prepared, messages.Failure):
            raise RunFailure(
                Status.RUNTIME_ERROR,
                f"the worker could not prepare {self.device}: {prepared.reason}",
                prepared.traceback,
            )
        self.prepared_reply = prepared
        with self.phases(START_UP):  # the reference's timer, with the method chosen for both sides
            self.timer = self._timer(prepared)
        setup = setup.model_copy(update={"method": self.timer.method})
        language = self.solution.manifest.language
        with self.phases(BUILD):
            if language in runtimes.STARTED_AHEAD:  # its threads are the harness's (solutions/runtimes.py)
                worker.ask(
                    messages.StartRuntime(language=language, setup=setup),
                    self.deadline,
                    f"starting the {language} runtime",
                )
            if self.backend.host_timed and self.options.mode != "test":  # the CPU-time bound's allowance,
                # measured while no solution code is loaded
                self.process_extra = calibrate(worker, self.device, self.backend, setup, self.deadline)
            built = worker.ask(
                messages.Build(solution=self.solution.model_dump(mode="json"), setup=setup),
                self.deadline,
                "building the solution",
            )
        if record.environment is not None and built.runtime:
            record.environment.solution_runtime = built.runtime
        method = self.timer.method
        if record.environment is not None:
            record.environment.worker_network = built.network
            record.environment.timer_eviction = self.timer.eviction or None
            worker_records = self.prepared_reply.timer_records if self.prepared_reply is not None else None
            if self.timer.records or worker_records:
                record.environment.timer_records = f"supervisor: {self.timer.records}; worker: {worker_records}"
        self.details.append(f"\n[gpuarena] worker rights: {built.rights}\n")
        measured: list[tuple[WorkloadSession, WorkloadResult]] = []
        for index, workload in enumerate(workloads):
            self.progress(f"workload {index + 1}/{len(workloads)}: {workload.name}")
            session, result = self._workload(worker, arena, workload, method)
            record.workloads.append(result)
            if result.time is not None:
                session.private.clear()  # the buffers stay (the arena's until the run ends); fresh inputs come later
                measured.append((session, result))
            if result.status != Status.PASSED:
                record.status, record.reason = result.status, f"workload {workload.name}: {result.reason}"
                record.workloads += [
                    WorkloadResult(
                        name=w.name,
                        status=Status.SKIPPED,
                        axes=w.axes,
                        dtype=w.dtype,
                        weight=w.weight,
                        reason="not run: an earlier workload failed",
                    )
                    for w in workloads[index + 1 :]
                ]
                return
        if measured and self.backend.kernel_duration and not self._kernel_durations(worker, measured, record):
            return
        timed = [w for w in record.workloads if w.speedup]
        if timed:
            # timed holds only workloads with a speedup
            record.score = weighted_geomean([cast(float, w.speedup) for w in timed], [w.weight for w in timed])

    def _kernel_durations(
        self, worker: WorkerProcess, measured: list[tuple[WorkloadSession, WorkloadResult]], record: Evaluation
    ) -> bool:
        """ncu's figure for every timed workload (kernel_duration.measure); False when
        a check in it failed the run."""
        if not kernel_duration.asked(self.options.kernel_duration):
            by_choice = self.options.kernel_duration is False or not _switch("GPUARENA_KERNEL_DURATION", True)
            kernel_duration.skip([result for _, result in measured], kernel_duration.switched_off(by_choice))
            return True
        self.progress("reading ncu's kernel durations")
        try:
            with self.phases(KERNEL_DURATION), self.gpu_alone():
                kernel_duration.measure(self, worker, measured)
        except RunFailure as failure:
            record.status, record.reason = Status(failure.status), failure.reason
            if failure.detail:
                self.details.append(f"\n[gpuarena] {failure.reason}\n{failure.detail}")
            return False
        return True

    def _workload(
        self, worker: WorkerProcess, arena: SharedArena, workload: Workload, method: str
    ) -> tuple[WorkloadSession, WorkloadResult]:
        result = WorkloadResult(
            name=workload.name, status=Status.PASSED, axes=workload.axes, dtype=workload.dtype, weight=workload.weight
        )
        with self.phases(CORRECTNESS):  # inputs, the reference's outputs and the shared buffers
            timing = self.options.mode != "test" and workload.timed
            returns = self.convention == "return"
            audited = self.backend.device_audit and not self._audit_off()

            def draw() -> tuple[WorkloadSession, memory_plan.Drawn]:
                fresh = WorkloadSession(self.problem, workload, self.device, self.seed, arena, self.fresh_seed)
                return fresh, memory_plan.draw_and_allocate(
                    fresh,
                    self.device,
                    timed=timing,
                    input_budget=lambda: self.backend.input_budget(self.device),
                    twins=(1 if self.backend.host_timed else (2 if returns else 3) if audited else 0) if timing else 0,
                    returns=returns,
                )

            session, drawn, status = held_memory.draw_workload(worker, self.backend, self.device, self.deadline, draw)
            for line in (drawn.note, drawn.reason):
                if line:
                    self.details.append(f"\n[gpuarena] {workload.name}: {line}\n")
            if drawn.reason:
                result.status, result.reason = status, drawn.reason
                return session, result
            first, first_ref = drawn.first, drawn.first_ref
            assert first is not None and first_ref is not None  # drawn, as no reason was given
            fds = arena.take_fds()  # CUDA buffers for a worker of its own user (see transport)
            try:
                reply = worker.request(
                    messages.Share(
                        workload=workload.name, sets=session.handles["sets"], dests=session.handles["dests"]
                    ),
                    self.deadline,
                    f"sharing inputs of {workload.name}",
                    fds=fds,
                )
            finally:
                for fd in fds:
                    os.close(fd)
        if isinstance(reply, messages.Failure):
            # the worker could not map the shared buffers (CUDA IPC refused, say): said, with its traceback
            failure = worker_failure(reply)
            result.status = Status(failure.status)
            result.reason = (
                f"the worker could not map the shared inputs and outputs: {failure.reason or 'no reason given'}"
            )
            self.details.append(f"\n[gpuarena] {workload.name}: {result.reason}\n{failure.detail}")
            return session, result
        try:
            with self.phases(CORRECTNESS):
                untimed = sum(self.options.mode == "test" or not w.timed for w in self.workloads())
                check_correctness(self, self.options.trials, worker, session, result, first, first_ref, timing, untimed)
            del first, first_ref  # the timing draws its own: a workload of many GB holds two tensors less
            if timing and result.status == Status.PASSED:
                plan = TimingPlan(
                    budget_s=self.options.budget_s,
                    max_samples=self.options.max_samples,
                    min_samples=self.options.min_samples or self.backend.min_samples,
                )
                with self.phases(TIMING), self.gpu_alone():
                    measure_workload(self, worker, session, result, plan)
        except RunFailure as failure:
            result.status, result.reason = Status(failure.status), failure.reason
            if failure.detail:
                self.details.append(f"\n[gpuarena] {workload.name}: {failure.reason}\n{failure.detail}")
        return session, result
