"""Where the PM sampler's samples lie on the host's clock (device/sample_clock.py), and segments
read by their instants (device_audit.DeviceSampler with a calibrated clock): what the audit
relies on instead of a decoding pass per mark."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from gpuarena.harness.device import sample_clock
from gpuarena.harness.device.device_audit import DeviceSampler, SamplerError, SamplesLost, Span

WIDTH = 120_000


def samples_with_burst(
    offset: int,
    host_start: int,
    host_end: int,
    lead_busy: bool = False,
    after: int = 4,
    dip: bool = False,
    launch: int = 10_000,
) -> list[list[float]]:
    """Samples of WIDTH ns (newest first, as the sampler lists them) around a spin that ran from
    `launch` ns after host_start to 10 µs before host_end, on the samples' clock (host + offset)."""
    gpu_start, gpu_end = host_start + offset + launch, host_end + offset - 10_000
    first = (gpu_start - 3_000_000) // WIDTH * WIDTH + 7_000
    samples = []
    t = first
    while t < gpu_end + after * WIDTH:
        busy = max(0, min(t + WIDTH, gpu_end) - max(t, gpu_start))
        if lead_busy and gpu_start - 1_000_000 <= t < gpu_start - 1_000_000 + WIDTH:
            busy = WIDTH // 2
        if dip and t < (gpu_start + gpu_end) // 2 <= t + WIDTH:
            busy = WIDTH // 3
        samples.append([t, t + WIDTH, float(busy), 0.0])
        t += WIDTH
    return samples[::-1]


def test_the_offset_is_read_from_the_burst_s_edges():
    host_start, host_end = 10**18, 10**18 + 520_000
    for offset in (90_000, -19_000_000, 0, 3):
        found, guard, why = sample_clock.estimate(
            samples_with_burst(offset, host_start, host_end), host_start, host_end
        )
        assert why == "" and found == offset  # the midpoint of the edges (10 µs of latency each)
        assert guard == WIDTH + 10_000 + sample_clock.GUARD_EXTRA_NS  # half their disagreement


def test_a_burst_not_yet_decoded_to_its_end_is_asked_for_again():
    host_start, host_end = 10**18, 10**18 + 520_000
    samples = samples_with_burst(0, host_start, host_end, after=0)
    assert sample_clock.estimate(samples, host_start, host_end) == (None, 0, "incomplete")


def test_anything_but_the_burst_alone_leaves_the_audit_on_marks():
    host_start, host_end = 10**18, 10**18 + 520_000
    busy_before = samples_with_burst(0, host_start, host_end, lead_busy=True)
    assert "not quiet" in sample_clock.estimate(busy_before, host_start, host_end)[2]
    uneven = samples_with_burst(0, host_start, host_end, dip=True)
    assert "steady" in sample_clock.estimate(uneven, host_start, host_end)[2]
    # a spin that started long after its launch (its kernel loaded first: 9 ms on an H200) is not a clock
    late = samples_with_burst(0, host_start, host_end + 9_000_000, launch=9_000_000)
    assert "disagree" in sample_clock.estimate(late, host_start, host_end + 9_000_000)[2]
    # a burst far longer on the GPU than on the host is someone else's work beside it
    assert (
        "read"
        in sample_clock.estimate(samples_with_burst(0, host_start, host_end), host_start, host_start + 100_000)[2]
    )
    assert sample_clock.estimate([], host_start, host_end)[0] is None
    idle = [[t, t + WIDTH, 0.0, 0.0] for t in range(0, 40 * WIDTH, WIDTH)]
    assert "not seen" in sample_clock.estimate(idle, host_start, host_end)[2]


FAKE = """
import json, sys
log = open(sys.argv[-1], "a")
print(json.dumps({"ready": True, "chip": "FAKE", "traffic": ""}), flush=True)
for line in sys.stdin:
    line = line.strip()
    log.write(line + "\\n"); log.flush()
    if line == "quit":
        if __import__("os").path.exists(sys.argv[-1] + ".slow"):  # CUPTI's teardown, drawn out
            __import__("time").sleep(1.0)
        break
    if line.startswith("windows "):
        ends = [int(x) for x in line.split()[1:]]
        pairs = list(zip(ends[::2], ends[1::2]))
        short = float(open(sys.argv[-1] + ".short").read()) if __import__("os").path.exists(sys.argv[-1] + ".short") else 1.0
        print(json.dumps({"windows": [[1000.0 * short, (b - a) * short, 3, 2000.0 * short if short < 1 else -1] for a, b in pairs], "overflow": 0}), flush=True)
    elif line.startswith("samples "):
        print(json.dumps({"samples": [], "overflow": 0}), flush=True)
    else:
        print(json.dumps({"started": True} if line == "start" else {"busy_ns": 0, "span_ns": 0, "samples": 0, "overflow": 0}), flush=True)
"""


def stand_in(tmp_path: Path, log: Path) -> DeviceSampler:
    """A DeviceSampler over FAKE, which logs each command it gets to `log`."""
    script = tmp_path / "fake-sampler"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    import gpuarena.harness.device.device_audit as device_audit

    real_popen = device_audit.subprocess.Popen

    def popen(args, **kwargs):
        return real_popen([*args, str(log)], **kwargs)

    device_audit.subprocess.Popen = popen
    try:
        return DeviceSampler(script, 0)
    finally:
        device_audit.subprocess.Popen = real_popen


@pytest.fixture
def fake_sampler(tmp_path: Path):
    """A DeviceSampler over a stand-in process that speaks the sampler's protocol, answers every
    window as fully covered with 1 µs busy, and logs each command it got."""
    log = tmp_path / "commands.log"
    sampler = stand_in(tmp_path, log)
    sampler.start()
    sampler.offset_ns, sampler.guard_ns, sampler.clock_missing = 5_000, 160_000, ""
    yield sampler, log
    sampler.close()


def test_spans_are_read_together_chained_ones_tile_and_the_others_keep_a_guard(fake_sampler):
    sampler, log = fake_sampler
    _, first = sampler.segment(lambda: None, "one")
    _, chained = sampler.segment(lambda: None, "two", chained=True)
    _, apart = sampler.segment(lambda: None, "three")
    assert all(isinstance(s, Span) for s in (first, chained, apart))
    assert chained.start_ns == first.end_ns  # nothing between them goes unread
    assert apart.start_ns >= chained.end_ns + sampler.guard_ns  # a quiet guard between them
    assert not any(line.startswith("windows") for line in log.read_text().splitlines())
    assert first.busy_ns == 1000.0 and chained.busy_ns == 1000.0 and apart.read_bytes is None
    windows = [line for line in log.read_text().splitlines() if line.startswith("windows")]
    assert len(windows) == 1  # one request for the three
    ends = [int(x) for x in windows[0].split()[1:]]
    assert ends == [first.start_ns, first.end_ns, chained.start_ns, chained.end_ns, apart.start_ns, apart.end_ns]
    # a window between any two instants (bench/research/pm_clock_probe.py) goes the same way
    assert sampler.window(10, 20).busy_ns == 1000.0
    assert log.read_text().splitlines()[-1] == "windows 10 20"


def test_a_span_its_samples_do_not_cover_is_an_error_not_an_idle_gpu(fake_sampler, tmp_path):
    sampler, log = fake_sampler
    Path(str(log) + ".short").write_text("0.4")
    _, span = sampler.segment(lambda: None, "the solution's request")
    with pytest.raises(SamplesLost, match="cover .* another process made or ended a CUDA context"):
        span.read()


def test_a_span_missing_a_few_samples_is_read_as_the_kept_ones_say(fake_sampler, tmp_path):
    """Samples lost from a long block (11% of a 15.6 ms one, KernelBench's 6.4 GB softmax on an
    H200) leave its figures scaled to the whole span, not an error and not idle time."""
    sampler, log = fake_sampler
    Path(str(log) + ".short").write_text("0.8")  # the kept samples: 80% of the span, 0.8 µs busy, 1.6 KB read
    _, span = sampler.segment(lambda: None, "the reference's timed block")
    window = span.read()
    assert window.busy_ns == pytest.approx(1000.0) and window.read_bytes == pytest.approx(2000.0)
    assert window.span_ns == pytest.approx(span.end_ns - span.start_ns)
    assert sampler.windows_read() == "instants, offset 5.0 µs, samples missing from up to 20% of a window"


def test_without_a_calibrated_clock_segments_are_read_by_marks(fake_sampler):
    sampler, log = fake_sampler
    sampler.offset_ns = None
    _, window = sampler.segment(lambda: None, "one")
    assert not isinstance(window, Span)
    assert [line for line in log.read_text().splitlines() if line != "start"] == ["mark", "mark"]
    assert json.loads(json.dumps(window.busy_ns)) == 0


def test_spans_an_earlier_audit_left_unread_are_dropped_not_read_later(fake_sampler):
    """A workload that failed mid-round leaves spans nobody reads; the next calibration (or a
    restart) drops them, so a warm process's next job never asks for samples long gone."""
    sampler, log = fake_sampler
    _, stale = sampler.segment(lambda: None, "a request of a failed job")
    sampler.calibrate(lambda: None)  # the stand-in lists no samples: no clock, marks from here
    assert sampler.pending == [] and sampler.offset_ns is None and "too few samples" in sampler.clock_missing
    with pytest.raises(SamplerError, match="over"):
        stale.read()
    assert not any(line.startswith("windows") for line in log.read_text().splitlines())


def test_a_sampler_left_to_quit_alone_is_gone_before_the_next_one_starts(tmp_path):
    """A run whose process ends next does not wait for its sampler's teardown (close(wait=False)),
    but a sampler started later in the same process, which needs the counters, waits for it."""
    log = tmp_path / "commands.log"
    Path(str(log) + ".slow").write_text("")  # each stand-in takes a second to leave
    first = stand_in(tmp_path, log)
    first.close(wait=False)
    assert first.process.poll() is None  # asked to quit, still leaving
    second = stand_in(tmp_path, log)  # waits for the first to be gone
    assert first.process.poll() is not None
    second.close()
    assert second.process.poll() is not None
    assert log.read_text().splitlines().count("quit") == 2
