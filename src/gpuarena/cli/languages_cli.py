"""`gpuarena languages`: the kernel languages registered (solutions/languages/), whether each one's
package is here, and its self-test on a device (gpuarena/language_check.py): what a runner runs
when it starts, by hand."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from gpuarena.cli.console import fail, out
from gpuarena.errors import GpuarenaError

STYLES = {"passed": "green", "failed": "bold red", "skipped": "yellow"}


def _package(name: str) -> str:
    from gpuarena.solutions import languages, runtimes

    language = languages.get(name)
    if language is None or language.package is None:
        return "torch"
    if not language.package.installed():
        return f"{language.package.distribution}: not installed"
    return runtimes.describe(name) or language.package.distribution


def _kind(device: str) -> str:
    """The device kind outcomes are kept for: cpu, or the GPU's model as a runner names it."""
    if device.partition(":")[0] == "cpu":
        return "cpu"
    from gpuarena.host_devices import detect

    index = device.partition(":")[2] or "0"
    return next((s.kind for s in detect(cpu=False) if s.device == f"cuda:{index}"), device)


def languages_cmd(
    device: Annotated[str, typer.Option(help="The device the self-tests run on: cpu, cuda or cuda:N")] = "cpu",
    self_test: Annotated[
        bool, typer.Option("--self-test", help="Run the self-tests that have not passed with this software before")
    ] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="With --self-test: run them all again, cache or not")] = False,
    language: Annotated[list[str] | None, typer.Option(help="Only this language (repeatable)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the languages as JSON")] = False,
) -> None:
    """The kernel languages, their packages, and their self-tests on a device: each language's
    tiny program judged by the real harness on level1/add (without --self-test: the outcomes
    kept from an earlier run with this software)."""
    from gpuarena.language_check import cached, self_tests, why_skipped
    from gpuarena.solutions import languages

    try:
        if device.partition(":")[0] not in ("cpu", "cuda"):
            raise GpuarenaError(f"--device {device!r}: use cpu, cuda or cuda:N")
        known = [found.name for found in languages.registered()]
        unknown = sorted(set(language or ()) - set(known))
        if unknown:
            raise GpuarenaError(f"--language {', '.join(unknown)}: not a kernel language ({', '.join(known)})")
        names = [n for n in known if not language or n in language]
        kind, pin = _kind(device), {}
        if device.startswith("cuda:"):  # pinned as a runner pins a slot: the child sees that GPU as cuda
            pin, device = {"CUDA_VISIBLE_DEVICES": device.partition(":")[2], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "cuda"
        if self_test:
            results = {r.language: r.summary() for r in self_tests(kind, device, names, env=pin, fresh=fresh)}
        else:
            results = {}
            for name in names:
                skipped, kept = why_skipped(name, device), cached(name, kind, device)
                results[name] = f"skipped: {skipped}" if skipped else "passed" if kept else "not run"
    except GpuarenaError as exc:
        fail(exc)
    rows = []
    for name in names:
        found = languages.get(name)
        assert found is not None
        rows.append(
            {
                "language": name,
                "package": _package(name),
                "devices": list(found.self_test.devices),
                "started_ahead": found.start is not None,
                "self_test": results[name],
            }
        )
    if json_out:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        table = Table(header_style="bold")
        for column in ("language", "package", "devices", "started ahead", f"self-test on {kind}"):
            table.add_column(column, overflow="fold")
        for row in rows:
            outcome = str(row["self_test"])
            table.add_row(
                str(row["language"]),
                str(row["package"]),
                ", ".join(row["devices"]),  # type: ignore[arg-type]
                "yes" if row["started_ahead"] else "",
                Text(outcome, style=STYLES.get(outcome.partition(":")[0], "")),
            )
        out.print(table)
    if any(str(row["self_test"]).startswith("failed") for row in rows):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("languages")(languages_cmd)
