"""GPUARENA_RUNNER_BUDGET: the timing budget per workload of a runner's jobs, for `gpuarena
runner` (its --budget) and for the runner `gpuarena serve` embeds, which has no flag of its
own. A test suite or a smoke test sets it low; a bad value stops the server before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuarena.cli import serve as serve_module
from gpuarena.errors import GpuarenaError
from gpuarena.service.config import Settings


def test_the_embedded_runner_takes_its_budget_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    monkeypatch.delenv("GPUARENA_RUNNER_BUDGET", raising=False)
    assert serve_module.runner_budget() == 2.0
    monkeypatch.setenv("GPUARENA_RUNNER_BUDGET", "0.25")
    budget = serve_module.runner_budget()
    config = serve_module.embedded_config(settings, "embedded@here", gpus=False, budget_s=budget)
    assert config.budget_s == 0.25 and config.work_dir == settings.home / "runner"
    assert all(slot.device.startswith("cpu") for slot in config.slots)


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "inf", "nan"])
def test_a_bad_budget_is_named_before_the_server_starts(monkeypatch, tmp_path: Path, raw: str) -> None:
    monkeypatch.setenv("GPUARENA_RUNNER_BUDGET", raw)
    with pytest.raises(GpuarenaError, match="GPUARENA_RUNNER_BUDGET=.*seconds, above 0"):
        serve_module.runner_budget()
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    with pytest.raises(GpuarenaError, match="GPUARENA_RUNNER_BUDGET"):  # before the socket and the database
        serve_module.serve(settings, "127.0.0.1", 1, with_runner=True)
    assert not (tmp_path / "db.sqlite").exists()


def test_gpuarena_runner_reads_its_budget_from_the_environment(monkeypatch) -> None:
    """The runner's --budget defaults to GPUARENA_RUNNER_BUDGET; the flag wins over it."""
    from gpuarena.cli.app import app
    from gpuarena.runner import agent

    seen: list[float] = []

    def run(self) -> None:  # the configuration the CLI built, and no serving
        seen.append(self.config.budget_s)

    monkeypatch.setattr(agent.Runner, "run", run)
    base = ["runner", "--server", "http://127.0.0.1:9", "--token", "gpa_x", "--devices", "cpu", "--no-self-test"]
    cli = CliRunner()
    assert cli.invoke(app, base, env={"GPUARENA_RUNNER_BUDGET": "0.3"}).exit_code == 0
    assert cli.invoke(app, [*base, "--budget", "0.7"], env={"GPUARENA_RUNNER_BUDGET": "0.3"}).exit_code == 0
    for bad in ("0", "-1", "inf", "nan"):  # refused as serve's embedded runner refuses them
        refused = cli.invoke(app, base, env={"GPUARENA_RUNNER_BUDGET": bad})
        assert refused.exit_code == 2 and "above 0" in refused.output, (bad, refused.output)
    assert seen == [0.3, 0.7]


def test_gpuarena_serve_names_a_bad_budget_before_it_says_it_serves(tmp_path: Path) -> None:
    from gpuarena.cli.app import app

    said = CliRunner().invoke(app, ["serve", "--home", str(tmp_path / "home")], env={"GPUARENA_RUNNER_BUDGET": "soon"})
    assert said.exit_code == 2 and "GPUARENA_RUNNER_BUDGET='soon'" in said.output
    assert "serving on" not in said.output and not (tmp_path / "home").exists()
