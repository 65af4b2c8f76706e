"""Dataset samples through the service (issue 21), on a real database: a contributor submits a
sample folder; a runner's job checks it (the function `gpuarena.runner.execute` runs for a
sample job, on the CPU); organizers accept or reject it with a comment; an accepted sample
counts for the ccf-dataset contest it was entered in and joins the dataset that `gpuarena
dataset pull` writes, whose problem `gpuarena check` passes; a later sample that repeats it is a
duplicate. Honest, duplicate and broken samples (tests/dataset/test_sample.py's), and bad input
refused with a clear error that keeps nothing. tests/service/test_samples_end_to_end.py runs
the same with a real server, runner and CLI."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from tests.dataset.test_sample import copy_sample, softmax_sample
from tests.service.conftest import Api, submission_body
from tests.web.conftest import csrf_of
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.contracts.packed import PackedProblem
from gpuarena.dataset.pull import DatasetSample, write_pulled
from gpuarena.dataset.sample_job import check_sample_job
from gpuarena.dataset.sample_pack import SAMPLES_SLUG, sample_solution
from gpuarena.errors import GpuarenaError
from gpuarena.solutions.model import Solution

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
WRONG_KERNEL = "import torch\n\n\ndef solve(x):\n    return x * 0.5\n"


def made_by(folder: Path, contributor: str) -> Path:
    """The sample with its contributor set (a sample is submitted by its contributor)."""
    toml = folder / "sample.toml"
    toml.write_text(toml.read_text().replace('contributor = "alice"', f'contributor = "{contributor}"'))
    return folder


def honest(tmp_path: Path, name: str, contributor: str) -> Path:
    return made_by(copy_sample(tmp_path / name), contributor)


def duplicate(tmp_path: Path, contributor: str) -> Path:
    """Repeats the bundled level1/softmax's small-64x1000 (written otherwise)."""
    return made_by(softmax_sample(tmp_path / "dup"), contributor)


def broken(tmp_path: Path, contributor: str) -> Path:
    """Its first kernel computes the wrong values."""
    folder = honest(tmp_path, "broken", contributor)
    (folder / "first.py").write_text(WRONG_KERNEL)
    return folder


def sample_body(folder: Path, contest: str | None = None, **extra) -> dict:
    solution = sample_solution(folder)
    body = {
        "problem": SAMPLES_SLUG,
        "device_kind": "cpu",
        "mode": "ranked",
        "solution": solution.model_dump(mode="json"),
        **extra,
    }
    if contest:
        body["contest"] = contest
    return body


def submit(api: Api, who: dict, folder: Path, contest: str | None = None) -> int:
    made = api.http.post("/api/submissions", json=sample_body(folder, contest), headers=who)
    assert made.status_code == 201, made.text
    return made.json()["id"]


def run_checks(api: Api, runner: tuple[dict, int], count: int) -> None:
    """Claim `count` jobs as the runner would and run each sample's check as its job process does."""
    headers, runner_id = runner
    for _ in range(count):
        job = api.http.post(
            "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=headers
        )
        assert job.status_code == 200, job.text
        job = job.json()
        evaluation, report = check_sample_job(
            PackedProblem.model_validate(job["problem"]),
            Solution.model_validate(job["solution"]),
            "cpu",
            job["mode"],
            0.1,
        )
        posted = api.http.post(
            f"/api/runner/jobs/{job['job_id']}/result",
            headers=headers,
            json={
                "lease_token": job["lease_token"],
                "runner_id": runner_id,
                "evaluation": evaluation.model_dump(mode="json"),
                "sample": report.model_dump(mode="json"),
            },
        )
        assert posted.status_code == 200, posted.text


def make_contest(
    api: Api, who: dict, slug: str = "data", problems: list[str] | None = None, rule: str = "ccf-dataset"
) -> None:
    made = api.http.post(
        "/api/contests",
        headers=who,
        json={
            "slug": slug,
            "title": "Samples",
            "start": (NOW - dt.timedelta(hours=1)).isoformat(),
            "end": (NOW + dt.timedelta(hours=1)).isoformat(),
            "problems": problems or [SAMPLES_SLUG],
            "device_kinds": ["cpu"],
            "rule": {"name": rule},
        },
    )
    assert made.status_code == 201, made.text


def test_samples_are_checked_reviewed_counted_and_join_the_dataset(api, tmp_path) -> None:
    runner = api.runner()
    olga, alice, bob, carol = (api.user("olga", "organiser"), api.user("alice"), api.user("bob"), api.user("carol"))
    make_contest(api, olga)
    ids = {
        "honest": submit(api, alice, honest(tmp_path, "honest", "alice"), contest="data"),
        "duplicate": submit(api, bob, duplicate(tmp_path, "bob"), contest="data"),
        "broken": submit(api, bob, broken(tmp_path, "bob"), contest="data"),
    }
    queued = api.http.get("/api/samples").json()
    assert {s["id"]: s["status"] for s in queued} == {i: "queued" for i in ids.values()}
    too_early = api.http.post(f"/api/samples/{ids['honest']}/review", headers=olga, json={"decision": "accepted"})
    assert too_early.status_code == 400 and "has not been checked yet" in too_early.json()["error"]

    run_checks(api, runner, 3)
    shown = {name: api.http.get(f"/api/samples/{sid}", headers=olga).json() for name, sid in ids.items()}
    assert shown["honest"]["status"] == "ok" and shown["honest"]["problem"] == "rms_scale"
    # the sample's score is over the canonical reference (issue 48), at most the kernel's own speed-up
    assert 0 < shown["honest"]["score"] == shown["honest"]["report"]["score"]
    assert shown["honest"]["score"] <= shown["honest"]["report"]["optimised"]["score"] * (1 + 1e-9)
    assert shown["duplicate"]["status"] == "duplicate"
    assert [(d["problem"], d["whole"]) for d in shown["duplicate"]["report"]["duplicates"]] == [
        ("level1/softmax", True)
    ]
    assert shown["broken"]["status"] == "broken" and shown["broken"]["report"]["first"]["status"] == "WRONG_VALUES"
    assert any(e.startswith("first: first.py is WRONG_VALUES") for e in shown["broken"]["report"]["errors"])
    assert "gpuarena-sample-" not in str(shown)  # the runner's temporary folder is not in the report
    submissions = {s["id"]: s for s in api.http.get("/api/submissions").json()}
    assert submissions[ids["honest"]]["status"] == "PASSED" and submissions[ids["broken"]]["status"] == "REJECTED"
    assert submissions[ids["broken"]]["reason"].startswith("broken: first: first.py is WRONG_VALUES")
    assert api.http.get("/api/leaderboard", params={"problem": SAMPLES_SLUG, "device_kind": "cpu"}).json()["rows"] == []

    # who may review: the contest's organizers, and only a sample whose check was ok is accepted
    refused = api.http.post(f"/api/samples/{ids['broken']}/review", headers=olga, json={"decision": "accepted"})
    assert refused.status_code == 400, refused.text
    assert (
        "sample" in refused.json()["error"]
        and "only a sample whose check was ok can be accepted" in refused.json()["error"]
    )
    not_theirs = api.http.post(f"/api/samples/{ids['honest']}/review", headers=bob, json={"decision": "accepted"})
    assert not_theirs.status_code == 403 and "only the organizers of data (olga)" in not_theirs.json()["error"]
    by_hand = api.http.post(
        f"/api/contests/data/entries/{ids['honest']}/review",
        headers=olga,
        json={"decision": "accepted", "samples_accepted": 5},
    )
    assert by_hand.status_code == 400 and "is a dataset sample: review it as one" in by_hand.json()["error"]
    accepted = api.http.post(
        f"/api/samples/{ids['honest']}/review",
        headers=olga,
        json={"decision": "accepted", "comment": "a clear report, thanks"},
    )
    assert accepted.status_code == 200 and accepted.json()["review"] == "accepted", accepted.text
    for name in ("duplicate", "broken"):
        rejected = api.http.post(
            f"/api/samples/{ids[name]}/review",
            headers=olga,
            json={"decision": "rejected", "comment": f"{name}: see the check"},
        )
        assert rejected.status_code == 200, rejected.text

    # the contributors see their samples' status and the comment
    seen = {s["id"]: s for s in api.http.get("/api/samples", params={"user": "bob"}).json()}
    assert (
        seen[ids["duplicate"]]["review"] == "rejected"
        and seen[ids["duplicate"]]["review_comment"] == "duplicate: see the check"
    )
    mine = api.http.get(f"/api/samples/{ids['honest']}", headers=alice).json()
    assert (mine["review"], mine["reviewer"], mine["review_comment"]) == ("accepted", "olga", "a clear report, thanks")

    # the standings count accepted samples and their score, nobody typed a number
    rows = api.http.get("/api/contests/data/standings").json()["standings"]["rows"]
    assert [(r["contestant"], r["total"]) for r in rows] == [("alice", 1), ("bob", 0)]
    assert rows[0]["figures"]["sample score"] == pytest.approx(shown["honest"]["score"])
    entries = {e["submission_id"]: e for e in api.http.get("/api/contests/data/entries", headers=olga).json()}
    assert (entries[ids["honest"]]["samples_accepted"], entries[ids["honest"]]["review"]) == (1, "accepted")
    assert entries[ids["broken"]]["samples_accepted"] == 0 and entries[ids["broken"]]["review"] == "rejected"
    back = api.http.post(f"/api/samples/{ids['honest']}/review", headers=olga, json={"decision": "pending"})
    assert back.status_code == 200
    assert api.http.get("/api/contests/data/standings").json()["standings"]["rows"][0]["total"] == 0
    api.http.post(f"/api/samples/{ids['honest']}/review", headers=olga, json={"decision": "accepted"})

    # the kernels' code is shown as a submission's is: to its author and staff, not to others
    anonymous = api.http.get(f"/api/samples/{ids['honest']}").json()
    assert anonymous["files"] is None and anonymous["files_hidden"] and anonymous["report"]["verdict"] == "ok"
    assert api.http.get(f"/api/samples/{ids['honest']}", headers=bob).json()["files"] is None
    assert "def solve" in mine["files"]["optimised.py"] and not mine["files_hidden"]
    assert api.http.get(f"/api/submissions/{ids['honest']}/code", headers=bob).status_code == 403

    # accepted samples join the dataset: pulled as a problem root that `gpuarena check` passes
    dataset = api.http.get("/api/samples/dataset").json()
    assert [(s["id"], s["contributor"], s["problem"]) for s in dataset] == [(ids["honest"], "alice", "rms_scale")]
    assert set(dataset[0]["files"]) == {"problem.toml", "reference.py"}  # the problem, not the kernels
    root = tmp_path / "pulled"
    assert write_pulled([DatasetSample.model_validate(s) for s in dataset], root, "test") == ["level1/rms_scale"]
    checked = CliRunner().invoke(app, ["check", str(root)])
    assert checked.exit_code == 0, checked.output
    listed = CliRunner().invoke(app, ["list", "--root", str(root)])
    assert listed.exit_code == 0 and "level1/rms_scale" in listed.output

    # and a later sample that repeats an accepted one is a duplicate of it
    again = submit(api, carol, honest(tmp_path, "again", "carol"))
    run_checks(api, runner, 1)
    repeated = api.http.get(f"/api/samples/{again}").json()
    assert repeated["status"] == "duplicate" and repeated["contest"] is None
    assert [d["problem"] for d in repeated["report"]["duplicates"]] == [f"samples/{ids['honest']}"]
    not_staff = api.http.post(f"/api/samples/{again}/review", headers=alice, json={"decision": "rejected"})
    assert not_staff.status_code == 403 and "only organisers and admins may" in not_staff.json()["error"]


def test_bad_samples_are_refused_at_the_door_and_nothing_is_kept(api, tmp_path) -> None:
    api.runner()
    olga, alice = api.user("olga", "organiser"), api.user("alice")
    make_contest(api, olga, "kernels", problems=["axpy_dest"], rule="fastest")
    make_contest(api, olga, "data-no-samples", problems=["axpy_dest"])
    good = honest(tmp_path, "good", "alice")

    def refused(body: dict, status: int, words: str) -> None:
        answer = api.http.post("/api/submissions", json=body, headers=alice)
        assert answer.status_code == status, answer.text
        assert words in answer.json()["error"], answer.text

    solution = sample_solution(good).model_dump(mode="json")
    no_manifest = {
        **solution,
        "sources": {**{k: v for k, v in solution["sources"].items() if k != "sample.toml"}, "notes.md": "x"},
    }
    refused({**sample_body(good), "solution": no_manifest}, 422, "needs its sample.toml among the sources")
    bad_toml = {**solution, "sources": {**solution["sources"], "sample.toml": "[sample\n"}}
    refused({**sample_body(good), "solution": bad_toml}, 400, "not valid TOML")
    no_prompt = {**solution, "sources": {k: v for k, v in solution["sources"].items() if k != "prompt.md"}}
    refused({**sample_body(good), "solution": no_prompt}, 400, "is not a complete sample: prompt:")
    refused(
        sample_body(honest(tmp_path, "bob's", "bob")), 400, "sample.toml says contributor = 'bob', but you are 'alice'"
    )
    refused(submission_body(problem=SAMPLES_SLUG), 400, "takes dataset samples: submit a sample's folder")
    refused({**sample_body(good), "problem": "axpy_dest"}, 400, "a dataset sample goes to the problem 'samples'")
    refused(sample_body(good, mode="test"), 400, "a sample's check has one mode")
    refused(sample_body(good, contest="kernels"), 400, "kernels takes no dataset samples")
    refused(sample_body(good, contest="data-no-samples"), 400, 'lists "samples" among its problems')
    too_big = {**solution, "sources": {**solution["sources"], "report.md": "word " * 600_000}}  # 3 MB
    refused({**sample_body(good), "solution": too_big}, 413, "larger than")
    assert api.http.get("/api/samples").json() == [] and api.http.get("/api/submissions").json() == []

    # the CLI refuses the same before anything is sent, naming the fault
    report = (good / "report.md").read_text()
    (good / "report.md").write_text("word " * 600_000)
    with pytest.raises(GpuarenaError, match="more than 2000000 bytes"):
        sample_solution(good)
    (good / "report.md").write_text(report)
    (good / "weights.bin").write_bytes(bytes(range(256)))
    with pytest.raises(GpuarenaError, match="weights.bin: not UTF-8 text; a sample submitted"):
        sample_solution(good)
    with pytest.raises(GpuarenaError, match="no sample.toml"):
        sample_solution(good / "problem")
    with pytest.raises(GpuarenaError, match="not a folder"):
        sample_solution(tmp_path / "missing")
    result = CliRunner().invoke(
        app, ["sample", "submit", str(good / "problem"), "--server", "http://127.0.0.1:9", "--token", "x"]
    )
    assert result.exit_code == 2 and "no sample.toml" in result.output

    assert api.http.post("/api/samples/999/review", headers=olga, json={"decision": "accepted"}).status_code == 404
    assert api.http.get("/api/samples/999").status_code == 404


def test_the_samples_page_lists_samples_and_organizers_review_there(api, tmp_path) -> None:
    runner = api.runner()
    alice = api.user("alice")
    olga_token = api.user("olga", "organiser")["Authorization"].split()[1]
    ok_id = submit(api, alice, honest(tmp_path, "honest", "alice"))
    broken_id = submit(api, alice, broken(tmp_path, "alice"))
    run_checks(api, runner, 2)

    public = api.http.get("/samples")
    assert public.status_code == 200 and f'id="sample-{ok_id}"' in public.text and "rms_scale" in public.text
    assert "WRONG_VALUES" in public.text and 'action="/samples/' not in public.text  # no form for visitors

    browser = api.http  # the same app, signed in with a session cookie as a browser would be
    form = browser.get("/signin")
    assert (
        browser.post(
            "/signin", data={"token": olga_token, "csrf_token": csrf_of(form.text), "next": "/"}, follow_redirects=False
        ).status_code
        == 303
    )
    page = browser.get("/samples")
    assert f'action="/samples/{ok_id}/review"' in page.text
    csrf = csrf_of(page.text)
    done = browser.post(
        f"/samples/{ok_id}/review",
        data={"decision": "accepted", "comment": "welcome", "csrf_token": csrf},
        follow_redirects=False,
    )
    assert done.status_code == 303
    bad = browser.post(
        f"/samples/{broken_id}/review", data={"decision": "accepted", "csrf_token": csrf}, follow_redirects=True
    )
    assert re.search(r"only a sample whose check was ok can be accepted", bad.text)
    shown = {s["id"]: s for s in api.http.get("/api/samples").json()}
    assert (shown[ok_id]["review"], shown[ok_id]["review_comment"]) == ("accepted", "welcome")
    assert shown[broken_id]["review"] == "pending"
