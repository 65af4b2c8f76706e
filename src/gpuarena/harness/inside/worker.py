"""The worker: an untrusted process that builds the solution and calls it on shared inputs.

It never sees seeds or reference outputs. It answers each request with JSON: raw facts
about what the solution returned and raw timing samples. Verdicts are the supervisor's.
Started as ``python -m gpuarena.harness.inside.sandbox FD``, which applies the process guards first.
"""

from __future__ import annotations

import base64
import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# Harness modules are imported (and their timers captured) before any solution code runs.
import torch

from gpuarena.contracts import messages
from gpuarena.harness import protocol
from gpuarena.harness.device.backend import CPU, backend_named
from gpuarena.harness.device.backend_base import Backend
from gpuarena.harness.device.range_timer import RangeTimerError
from gpuarena.harness.device.timing import Timer
from gpuarena.harness.inside import context_ahead, threads, triton_key
from gpuarena.harness.inside.signature import signature_problem
from gpuarena.harness.inside.stand_in import no_op_solve, stand_in_buffers
from gpuarena.harness.proctree import children_of
from gpuarena.harness.transport import attach, fds_needed
from gpuarena.solutions import runtimes
from gpuarena.solutions.build import BuildError, build
from gpuarena.solutions.model import Solution

# Bound before any solution code is imported: a solution that rebinds torch.Tensor.copy_,
# threading.enumerate or the reply function does not change what the worker calls. (It
# shares the process, so this raises the bar only; the supervisor's own checks, which do
# not trust the worker, are what hold: outputs compared there, times bounded by its clock.)
_Tensor = torch.Tensor
_type = type
_no_python_dispatch = torch._C._DisableTorchDispatch
_no_torch_function = torch._C.DisableTorchFunction
_raw_copy = torch.Tensor.copy_
_raw_fill = torch.Tensor.fill_


def _copy(dest: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """The harness's copy of an output into its destination, outside the timed window: with
    Python dispatch and torch-function handling off, so no TorchDispatchMode, tensor subclass
    or __torch_function__ of the solution's sees it (and does its deferred work there)."""
    with _no_python_dispatch(), _no_torch_function():
        return _raw_copy(dest, src)


def _fill(dest: torch.Tensor, value: Any) -> torch.Tensor:
    """The harness's poisoning of a destination, as unseen by the solution as _copy."""
    with _no_python_dispatch(), _no_torch_function():
        return _raw_fill(dest, value)


_enumerate = threading.enumerate
_is_alive = threading.Thread.is_alive
_getpid = os.getpid
_children_of = children_of
_send_reply = protocol.send_reply
_receive_request = protocol.receive_request
_receive_fds = protocol.receive_fds


class CallFailure(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _exception_line(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(_type(exc), exc)).strip()


def _is_compile_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in _type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "BuildError"})


class Worker:
    def __init__(self, conn: Connection, network: str = "unknown", rights: str = "unknown"):
        self.conn = conn
        self.network = network
        self.rights = rights
        self.solve: Callable[..., Any] | None = None
        self.device = torch.device("cpu")
        self.backend: Backend = CPU
        self._synchronize = CPU.synchronize
        self.timer: Timer | None = None
        self.convention = "return"
        self.float_outputs_converted = False  # RunSetup.float_outputs_converted
        self.input_names: list[str] = []
        self.output_names: list[str] = []
        self.sets: list[dict[str, Any]] = []
        self.dests: list[list[torch.Tensor]] = []
        self.workloads: dict[str, tuple[list[dict[str, Any]], list[list[torch.Tensor]]]] = {}
        """Every workload's buffers by name, for the run's last phase to come back to (select)."""
        self.children: set[int] = set()
        """The worker's child processes at the last check: one scan of /proc per request."""

    # -- requests (one handler each: HANDLERS, below the class) --------------------------------
    def ready(self, request: messages.Ready) -> messages.Done:
        """Answered once the worker's imports are done (a worker started ahead), and Triton's
        driver utilities made where its key was computed ahead: before any solution code, and
        before the worker takes the GPU's lock to prepare (a compile needs no GPU)."""
        triton_key.build_driver()
        return messages.Done(op="ready")

    def share(self, request: messages.Share) -> messages.Done:
        """A workload's buffers mapped: CUDA buffers for a worker of its own user come as file
        descriptors, sent right after the request (see transport)."""
        wanted = fds_needed([request.sets, request.dests])
        fds = _receive_fds(self.conn, wanted) if wanted else []
        mapped: dict[int, object] = {}  # a workload's device buffers are one allocation (transport)
        try:
            self.sets = [
                {k: attach(v, fds, mapped) if isinstance(v, dict) else v for k, v in s.items()} for s in request.sets
            ]
            self.dests = [[attach(h, fds, mapped) for h in d] for d in request.dests]
        finally:
            for fd in fds:
                os.close(fd)
        self.workloads[request.workload] = (self.sets, self.dests)
        return messages.Done(op="setup")

    def select(self, request: messages.Select) -> messages.Done:
        """Back to a workload shared earlier (the kernel-duration phase, after all of them)."""
        self.sets, self.dests = self.workloads[request.workload]
        return messages.Done(op="select")

    def close_kernel_profiler(self, request: messages.CloseKernelProfiler) -> messages.Done:
        """The phase is over: the counters go back to the supervisor."""
        if self.timer is not None:
            self.timer.close_kernel_profiler()
        return messages.Done(op="kernel_close")

    def release(self, request: messages.Release) -> messages.Done:
        """What the worker merely caches given back (held_memory.py): the collector's garbage and
        torch's cached blocks on a GPU, malloc's free pages on the host."""
        import gc

        gc.collect()
        self.backend.release_cached(self.device)
        return messages.Done(op="release")

    def call(self, request: messages.Call) -> messages.Reply:
        return self.guarded(lambda: self.call_once(request.index, self.dests[request.index], request.seed))

    def timed(self, request: messages.Time) -> messages.Reply:
        return self.guarded(lambda: self.time(request))

    def prepare(self, request: messages.Prepare) -> messages.Prepared:
        return self._prepare(request.setup)

    def _prepare(self, setup: messages.RunSetup) -> messages.Prepared:
        """The harness's own set-up, before any solution code: the device, its context and the
        timer (whose first profile starts CUPTI's threads). The supervisor counts the threads
        this leaves as the harness's; any thread after the import is the solution's."""
        begun = time.perf_counter()
        context_ahead.join()  # a context made ahead is the harness's, done before the threads are counted
        self.device = torch.device(setup.device)
        self.backend = backend_named(self.device.type)
        # bound now, before any solution code: a patched synchronize would let the copy race
        self._synchronize = self.backend.synchronize
        self.backend.activate(self.device)
        torch.empty(1, device=self.device)  # the context
        context = time.perf_counter()
        self._problem_names(setup)
        self.timer = Timer(
            self.device,
            method=setup.method,
            backend=self.backend,
            icache_image=base64.b64decode(setup.icache_image) if setup.icache_image is not None else None,
            timer_image=base64.b64decode(setup.timer_image) if setup.timer_image is not None else None,
        )
        # seconds per step, for bench/research/warm_breakdown.py (the Timer's own are in it)
        steps = {"context": context - begun, "timer": time.perf_counter() - context, **self.timer.startup_s}
        # what this timer does, said before any solution code: the run's method is chosen by it, never a later reply
        return messages.Prepared(
            method=self.timer.method,
            icache_sweep=self.timer.has_icache_sweep,
            timer_records=self.timer.records,
            steps={k: round(v, 4) for k, v in steps.items()},
        )

    def runtime(self, request: messages.StartRuntime) -> messages.Reply:
        """The solution's language runtime brought up as harness work, before the solution is
        imported (solutions/runtimes.py): the supervisor counts the threads it starts as the
        harness's."""
        if self.timer is None:
            self._prepare(request.setup)
        language = request.language
        try:
            runtimes.start(language, self.device)
        except runtimes.MissingPackage as exc:
            return messages.Failure(status="COMPILE_ERROR", reason=str(exc))
        except BaseException as exc:
            return messages.Failure(
                status="RUNTIME_ERROR",
                reason=f"the {language} runtime did not start on {self.device}: " + _exception_line(exc),
                traceback=traceback.format_exc(),
            )
        return messages.RuntimeStarted(runtime=runtimes.describe(language))

    def _problem_names(self, setup: messages.RunSetup) -> None:
        """The problem's calling convention and names: with `prepare`, or with `build` when the
        worker was prepared ahead, before its problem was known."""
        if setup.input_names or setup.output_names:
            self.convention = setup.convention
            self.float_outputs_converted = setup.float_outputs_converted
            self.input_names, self.output_names = list(setup.input_names), list(setup.output_names)

    def build(self, request: messages.Build) -> messages.Reply:
        solution = Solution.model_validate(request.solution)
        if self.timer is None:
            self._prepare(request.setup)
        self._problem_names(request.setup)
        assert self.timer is not None
        triton_key.join()  # Triton's cache key, if the worker computes it ahead, is done first
        if (why := solution.cuda_only()) and self.backend.name != "nvidia":  # said in one line, before a compiler
            return messages.Failure(status="COMPILE_ERROR", reason=f"{why}: use --device cuda")
        threads.no_tqdm_monitor()
        threads_before = self._threads()
        children_before = self.children = _children_of(_getpid())
        try:
            solve = build(
                solution, Path.cwd() / "solution", self.output_names if self.convention == "destination" else []
            )
        except BuildError as exc:
            return messages.Failure(status="COMPILE_ERROR", reason=str(exc))
        except BaseException as exc:  # import-time failure: the solution never became callable
            return messages.Failure(
                status="COMPILE_ERROR", reason=_exception_line(exc), traceback=traceback.format_exc()
            )
        problem = signature_problem(
            solve, self.input_names + (self.output_names if self.convention == "destination" else [])
        )
        if problem:
            return messages.Failure(status="COMPILE_ERROR", reason=problem)
        # nothing of the solution's may run outside its calls: a thread or process started
        # at import could work while the worker waits (during the reference's block, say)
        left = self._threads() - threads_before
        if left:
            return messages.Failure(
                status="REJECTED", reason=f"importing the solution left {len(left)} thread(s) running"
            )
        spawned = _children_of(_getpid()) - children_before
        if spawned:
            return messages.Failure(
                status="REJECTED", reason=f"importing the solution left {len(spawned)} child process(es) behind"
            )
        self.solve = solve
        return messages.Built(
            network=self.network, rights=self.rights, runtime=runtimes.describe(solution.manifest.language)
        )

    @staticmethod
    def _threads() -> set[threading.Thread]:
        return {t for t in _enumerate() if _is_alive(t)}

    def guarded(self, work: Callable[[], messages.Reply]) -> messages.Reply:
        try:
            return work()
        except CallFailure as failure:
            return messages.Failure(status=failure.status, reason=failure.reason)
        except BaseException as exc:
            status = "COMPILE_ERROR" if _is_compile_error(exc) else "RUNTIME_ERROR"
            reason = _exception_line(exc)
            if "active drivers" in reason and not self.backend.accelerator:
                reason += (
                    " (Triton found no GPU: run Triton solutions with --device cuda, or on the CPU "
                    "under TRITON_INTERPRET=1)"
                )
            return messages.Failure(status=status, reason=reason, traceback=traceback.format_exc())

    # -- calling the solution --------------------------------------------------------------
    def _invoke(self, k: int) -> Any:
        args = [self.sets[k][name] for name in self.input_names]
        if self.convention == "destination":
            args += self.dests[k]
        assert self.solve is not None  # set by load (or calibrate) before any call
        return self.solve(*args)

    def _outputs(self, k: int, result: Any) -> list[torch.Tensor]:
        """The outputs of a call, checked for count, exact type, device, shape, dtype and aliasing."""
        if self.convention == "destination":
            return self.dests[k]
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        expected = self.dests[k]
        if len(outs) != len(expected):
            raise CallFailure(
                "WRONG_SHAPE",
                f"returned {len(outs)} outputs, expected {len(expected)} ({', '.join(self.output_names)})",
            )
        for name, out, dest in zip(self.output_names, outs, expected):
            if _type(out) is not _Tensor:
                raise CallFailure(
                    "REJECTED",
                    f"output {name} is a {_type(out).__module__}.{_type(out).__qualname__}, not exactly a torch.Tensor",
                )
            if out.device != dest.device:
                raise CallFailure("REJECTED", f"output {name} is on {out.device}, expected {dest.device}")
            if out.shape != dest.shape:
                raise CallFailure(
                    "WRONG_SHAPE", f"output {name} has shape {list(out.shape)}, expected {list(dest.shape)}"
                )
            if out.dtype != dest.dtype and not (
                self.float_outputs_converted and out.is_floating_point() and dest.is_floating_point()
            ):
                raise CallFailure("WRONG_DTYPE", f"output {name} has dtype {out.dtype}, expected {dest.dtype}")
            lo, hi = _storage_span(out)
            for input_name, tensor in self.sets[k].items():
                if isinstance(tensor, _Tensor) and tensor.numel() and out.numel():
                    ilo, ihi = _storage_span(tensor)
                    if lo < ihi and ilo < hi:
                        raise CallFailure("REJECTED", f"output {name} aliases input {input_name}")
        return outs

    def _sync(self) -> None:
        self._synchronize(self.device)

    def _copy_out(self, outs: list[torch.Tensor], dests: list[torch.Tensor]) -> None:
        for out, dest in zip(outs, dests):
            if out is not dest:  # destination-passing wrote in place already
                _copy(dest, out)

    def _left_running(self, threads_before: set[threading.Thread], children_before: set[int] | None) -> None:
        left = self._threads() - threads_before
        if left:
            names = ", ".join(sorted(str(t.name)[:60] for t in left))[:300]
            raise CallFailure("REJECTED", f"solve() left {len(left)} thread(s) running after it returned ({names})")
        if children_before is None:
            return
        now = _children_of(_getpid())
        spawned = now - children_before
        self.children = now
        if spawned:
            # the worker is a child subreaper: a double-forked or setsid daemon is its child too
            raise CallFailure("REJECTED", f"solve() left {len(spawned)} child process(es) behind after it returned")

    def call_once(self, k: int, copy_to: list[torch.Tensor] | None, seed: int | None = None) -> messages.Done:
        threads_before = self._threads()
        children_before = self.children
        if seed is not None:  # a problem that draws in its calls (Call.seed)
            self.backend.seed(self.device, seed)
        result = self._invoke(k)
        self._sync()
        outs = self._outputs(k, result)
        if copy_to is not None:
            self._copy_out(outs, copy_to)
        self._sync()
        self._left_running(threads_before, children_before)
        return messages.Done(op="call")

    def _poison(self, k: int) -> None:
        for dest in self.dests[k]:
            if dest.is_floating_point():
                _fill(dest, float("nan"))
            else:
                _fill(dest, -1 if dest.dtype != torch.bool else True)

    def calibrate(self, request: messages.Calibrate) -> messages.Reply:
        """A `time` block of n calls of a solve() that does nothing, on tiny stand-in buffers,
        before any solution code is in this process: the supervisor measures its CPU time from
        outside and sets it against the same block in its own process (harness/calibration.py),
        which tells what this process (its sandbox, its threads, the protocol) adds to the
        harness's share on this machine. Refused once a solution is loaded: from then on the
        figure would be the solution's to shape."""
        if self.solve is not None:
            return messages.Failure(status="RUNTIME_ERROR", reason="a solution is loaded")
        if self.timer is None:
            self._prepare(request.setup)
        self._problem_names(request.setup)
        sets, dests = stand_in_buffers(self.input_names, self.output_names, self.device)
        saved = self.sets, self.dests
        self.sets, self.dests, self.solve = sets, dests, no_op_solve(self.convention, dests[0])
        self.children = _children_of(_getpid())  # the harness's own so far (a runtime's helpers)
        try:
            reply = self.time(messages.Time(n=request.n))
        except CallFailure as failure:
            return messages.Failure(status="RUNTIME_ERROR", reason=failure.reason)
        finally:
            self.sets, self.dests = saved
            self.solve = None
        return reply.model_copy(update={"op": "calibrate"})

    def time(self, request: messages.Time) -> messages.Timed:
        """Warm-up calls, then a timed block of n calls. Every timed call's outputs end up in
        its set's destination (copied there outside the window, for returned outputs): the
        worker does not know which calls the supervisor will check; it chooses afterwards."""
        assert self.timer is not None
        n_sets = len(self.sets)
        for i in range(request.warmup):  # every set once at least: all pages mapped in
            k = i % n_sets
            self.call_once(k, self.dests[k], request.seeds[k] if request.seeds else None)
        destination = self.convention == "destination"
        threads_before = self._threads()
        children_before = self.children  # as of the last check: nothing may have appeared since

        def prepare(i: int) -> None:
            if destination:
                self._poison(i % n_sets)
            if request.seeds:  # a problem that draws in its calls (Time.seeds)
                self.backend.seed(self.device, request.seeds[i % n_sets])

        def after(i: int, result: Any) -> None:
            k = i % n_sets
            self._copy_out(self._outputs(k, result), self.dests[k])
            self._left_running(threads_before, None)  # processes: once, after the block

        library = Path(request.kernel_library) if request.kernel_library is not None else None
        try:
            if library is not None:  # the ncu phase: held until kernel_close
                self.timer.open_kernel_profiler(library)
            samples = self.timer.run_block(
                lambda i: self._invoke(i % n_sets),
                request.n,
                prepare,
                after,
                evict=request.evict,
                kernel_library=library,
            )
        except RangeTimerError as exc:  # the profiler, not the solution: no figure, no verdict
            self._sync()
            return messages.Timed(kernel_error=str(exc)[:500])
        self._sync()
        self._left_running(threads_before, children_before)
        return messages.Timed(device_ns=samples.device_ns, e2e_ns=samples.e2e_ns, method=samples.method)


HANDLERS: dict[type[messages.Request[Any]], Callable[[Worker, Any], messages.Reply]] = {
    messages.Ready: Worker.ready,
    messages.Prepare: Worker.prepare,
    messages.StartRuntime: Worker.runtime,
    messages.Build: Worker.build,
    messages.Share: Worker.share,
    messages.Select: Worker.select,
    messages.CloseKernelProfiler: Worker.close_kernel_profiler,
    messages.Release: Worker.release,
    messages.Call: Worker.call,
    messages.Time: Worker.timed,
    messages.Calibrate: Worker.calibrate,
}
"""The worker's handler for each request (Exit is the serving loop's own)."""


CHECKED = (messages.Build, messages.Call, messages.Time, messages.Calibrate)
"""The requests after which the supervisor counts the worker's threads (not the harness's own
set-up, whose threads stay: the CUDA driver's, the profilers')."""


def main(argv: list[str], network: str = "unknown", rights: str = "unknown") -> None:
    """Serve requests until told to exit (started by gpuarena.harness.inside.sandbox)."""
    conn = Connection(int(argv[0]))
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the supervisor asks where a silent worker is
    worker = Worker(conn, network, rights)
    while True:
        try:
            request = _receive_request(conn)
        except (EOFError, OSError):
            return
        nonce = request.nonce
        if isinstance(request, messages.Exit):
            # Leave at once: the interpreter's own teardown (torch's, the solution's atexit
            # hooks) takes 0.5 s or more of every job and serves nothing; the supervisor
            # kills what is left of the process group anyway.
            sys.stdout.flush()
            sys.stderr.flush()
            threads.flush_c_stdio()  # in case C stdio holds what compiled code printed: _exit skips the flush
            _send_reply(conn, {"op": "exit", "nonce": nonce})  # the wire form: a dict (protocol.py)
            os._exit(0)
        tasks_before = threads.tasks()
        reply: messages.Reply
        try:
            reply = HANDLERS[_type(request)](worker, request)
        except BaseException as exc:
            reply = messages.Failure(
                status="RUNTIME_ERROR", reason=_exception_line(exc), traceback=traceback.format_exc()
            )
        sys.stdout.flush()
        sys.stderr.flush()
        if isinstance(request, CHECKED) and not (isinstance(request, messages.Time) and request.kernel_library):
            threads.wait_for_threads(tasks_before)
        _send_reply(conn, {**reply.model_dump(mode="json"), "nonce": nonce})
