"""`gpuarena bounty ...` against a real server over HTTP (the app served by uvicorn in this
process, over a real database): posting from options (tiers) and from TOML files, listing as a
table, JSON and CSV, reading the history, and every state change; mistakes exit 2 with the
reason and post nothing."""

from __future__ import annotations

import csv
import io
import json

from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.service.bounty_schemas import EXPORT_FIELDS


def _token(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def test_bounty_commands_against_a_server(api, live, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no saved login
    monkeypatch.setenv("COLUMNS", "250")
    api.runner()  # brings the cpu device kind
    org, alice, bob = (
        _token(api.user(name, role))
        for name, role in (("org", "organiser"), ("alice", "participant"), ("bob", "participant"))
    )
    cli = CliRunner()

    def bounty(*args: str, token: str | None = None, code: int = 0):
        done = cli.invoke(app, ["bounty", *args, "--server", live, *(["--token", token] if token else [])])
        assert done.exit_code == code, done.output
        return done

    def count() -> int:
        return len(json.loads(bounty("list", "--json").stdout))

    tiers = bounty(
        "create",
        "--title",
        "axpy",
        "--reward",
        "100",
        "--reward",
        "400",
        "--category",
        "speed",
        "--problem",
        "axpy_dest",
        "--device-kind",
        "cpu",
        "--speedup",
        "2",
        "--speedup",
        "4",
        token=org,
    )
    assert "bounty 1 (open): 100 USD, axpy (2x)" in tiers.stdout
    assert "bounty 2 (open): 400 USD, axpy (4x)" in tiers.stdout
    assert "speed-up of at least 4x over the reference on axpy_dest" in tiers.stdout

    several = tmp_path / "bounties.toml"
    several.write_text(
        '[[bounty]]\ntitle = "ROCm support"\nreward_amount = 2500\ncurrency = "eur"\n'
        'category = "hardware"\ndescription = "Runners on *AMD* GPUs."\n\n'
        '[[bounty]]\ntitle = "axpy 3x by new year"\nreward_amount = "99.99"\ncategory = "speed"\n'
        'problem = "axpy_dest"\ndevice_kind = "cpu"\ntarget_speedup = 3\n'
        "deadline = 2099-01-01T00:00:00Z\n"
    )
    made = json.loads(bounty("create", "--file", str(several), "--json", token=org).stdout)
    assert [(b["id"], b["reward_amount"], b["currency"], b["deadline"]) for b in made] == [
        (3, "2500", "EUR", None),
        (4, "99.99", "USD", "2099-01-01T00:00:00"),
    ]
    one = tmp_path / "one.toml"
    one.write_text('title = "flaky timer"\nreward_amount = "50"\ncategory = "bug"\n')
    assert "bounty 5 (open): 50 USD, flaky timer" in bounty("create", "--file", str(one), token=org).stdout

    mistakes = [
        (
            ["--file", str(_write(tmp_path, "float.toml", 'title = "t"\nreward_amount = 12.5\ncategory = "bug"\n'))],
            "write the amount as text",
        ),
        (
            ["--file", str(_write(tmp_path, "art.toml", 'title = "t"\nreward_amount = "1"\ncategory = "art"\n'))],
            "category",
        ),
        (["--file", str(_write(tmp_path, "mixed.toml", 'title = "t"\n[[bounty]]\ntitle = "u"\n'))], "not both: title"),
        (["--file", str(tmp_path / "missing.toml")], "cannot read"),
        (["--title", "t", "--category", "bug"], "give --title, --category and --reward"),
        (
            [
                "--title",
                "t",
                "--category",
                "speed",
                "--reward",
                "1",
                "--reward",
                "2",
                "--reward",
                "3",
                "--speedup",
                "2",
                "--speedup",
                "3",
            ],
            "3 --reward for 2 --speedup",
        ),
    ]
    for args, message in mistakes:
        refused = bounty("create", *args, token=org, code=2)
        assert message in refused.stderr, (args, refused.stderr)
    assert "needs an admin or organiser" in bounty("create", "--file", str(one), token=alice, code=2).stderr
    assert count() == 5  # nothing more was posted

    table = bounty("list").stdout
    assert "ROCm support" in table and "2x over reference on cpu" in table and "2500 EUR" in table
    assert [b["id"] for b in json.loads(bounty("list", "--category", "speed", "--json").stdout)] == [4, 2, 1]
    rows = list(csv.DictReader(io.StringIO(bounty("list", "--csv").stdout)))
    assert list(rows[0]) == EXPORT_FIELDS and [r["reward_amount"] for r in rows] == [
        "50",
        "99.99",
        "2500",
        "400",
        "100",
    ]
    assert "state: Input should be 'open'" in bounty("list", "--state", "lost", code=2).stderr

    assert "bounty 1 (claimed, claimed by alice until" in bounty("claim", "1", token=alice).stdout
    assert "already claimed by alice" in bounty("claim", "1", token=bob, code=2).stderr
    assert "claimed by alice until" in bounty("renew", "1", token=alice).stdout
    assert "only they or the bounty's poster" in bounty("release", "1", token=bob, code=2).stderr
    assert "bounty 1 (open)" in bounty("release", "1", "--note", "busy elsewhere", token=alice).stdout
    assert "no token for" in bounty("claim", "3", code=2).stderr

    bounty("claim", "3", token=bob)
    assert (
        "(submitted, claimed by bob" in bounty("submit", "3", "--note", "https://example.org/pull/9", token=bob).stdout
    )
    assert "who posted bounty" in bounty("verify", "3", token=bob, code=2).stderr
    assert "(verified, by bob)" in bounty("verify", "3", "--note", "works on an MI300", token=org).stdout
    assert "(paid, by bob): 2500 EUR" in bounty("pay", "3", "--note", "SEPA 4711", token=org).stdout
    assert "(withdrawn)" in bounty("withdraw", "2", "--note", "superseded", token=org).stdout
    assert "is withdrawn" in bounty("claim", "2", token=alice, code=2).stderr

    shown = bounty("show", "3").stdout
    for line in (
        "bounty 3 (paid, by bob): 2500 EUR, ROCm support",
        "claimed -> submitted",
        "https://example.org/pull/9",
        "works on an MI300",
        "SEPA 4711",
    ):
        assert line in shown, (line, shown)
    history = json.loads(bounty("show", "1", "--json").stdout)["history"]
    assert [(e["action"], e["actor"], e["note"]) for e in history][-1] == ("released", "alice", "busy elsewhere")
    assert "no bounty 99" in bounty("show", "99", code=2).stderr


def _write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return path


def test_a_speed_bounty_for_a_device_kind_no_runner_has_brought_is_posted_with_a_warning(
    api, live, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    org = _token(api.user("org", "organiser"))
    args = ["--title", "t", "--category", "speed", "--reward", "1", "--problem", "axpy_dest"]
    done = CliRunner().invoke(
        app,
        ["bounty", "create", *args, "--device-kind", "H100", "--speedup", "2", "--server", live, "--token", org],
    )
    assert done.exit_code == 0, done.output
    assert "bounty 1 (open): 1 USD, t" in done.stdout
    assert "warning: bounty 1: no runner of device kind 'H100' has been seen yet" in done.stderr
