"""Forward-time randomness under a generator the harness controls (issue 49): a problem whose
reference draws in its calls (dropout, torch.randn) says `seeded_calls = true`, and the harness
seeds torch's generators before every call, of the reference and of the solution alike, with a
seed drawn with the call's inputs (another for every trial and every round). A solution that
draws the same way gets the same numbers and passes, in the correctness trials and in the timed
rounds' checked calls; one that draws otherwise, not at all, or keeps what it drew on an earlier
call gets WRONG_VALUES."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, judge
from gpuarena.harness.problem_check import check_problem
from test_profile import make_fake_ncu

DROPOUT = FIXTURES / "seeded" / "dropout_softmax"  # not under fixtures/problems, which the service tests list
SAME_DRAWS = (
    "import torch\nimport torch.nn.functional as F\n\n\n"
    "def solve(x):\n    return torch.softmax(F.dropout(x, p=0.25, training=True) * 3, dim=-1)\n"
)
NO_DRAWS = "import torch\n\n\ndef solve(x):\n    return torch.softmax(x * 3, dim=-1)\n"
OTHER_DRAWS = (
    "import torch\nimport torch.nn.functional as F\n\n\n"
    "def solve(x):\n    torch.rand(1)  # one draw first: every mask after it is another\n"
    "    return torch.softmax(F.dropout(x, p=0.25, training=True) * 3, dim=-1)\n"
)
KEEPS_ITS_MASKS = (
    "import torch\nimport torch.nn.functional as F\n\nMASKS = {}\n\n\n"
    "def solve(x):\n"
    "    # the mask drawn on the first call on each buffer, kept for every later call on it\n"
    "    mask = MASKS.setdefault(x.data_ptr(), F.dropout(torch.ones_like(x), p=0.25, training=True))\n"
    "    return torch.softmax(x * mask * 3, dim=-1)\n"
)


def _solution(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text(code)
    return path


def test_a_problem_that_draws_in_its_calls_passes_check_when_it_says_so(tmp_path) -> None:
    assert check_problem(DROPOUT).ok, check_problem(DROPOUT).errors
    unsaid = tmp_path / "unsaid"
    shutil.copytree(DROPOUT, unsaid)
    toml = unsaid / "problem.toml"
    toml.write_text(toml.read_text().replace("seeded_calls = true\n", ""))
    errors = check_problem(unsaid).errors
    assert any("not deterministic" in e and "seeded_calls = true" in e for e in errors), errors


@pytest.mark.harness
def test_a_solution_that_draws_the_same_way_passes_timed(tmp_path) -> None:
    record = judge(str(DROPOUT), _solution(tmp_path, SAME_DRAWS), mode="benchmark", budget_s=0.3)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert all(w.time is not None for w in record.workloads)  # the timed rounds' checked calls matched too


@pytest.mark.harness
@pytest.mark.parametrize(
    "code", [NO_DRAWS, OTHER_DRAWS, KEEPS_ITS_MASKS], ids=["no draws", "other draws", "masks kept from a call before"]
)
def test_a_solution_that_draws_otherwise_is_wrong(tmp_path, code: str) -> None:
    record = judge(str(DROPOUT), _solution(tmp_path, code))
    assert record.status == "WRONG_VALUES", record.reason


# A KernelBench-format problem file (written for this test) whose forward applies dropout, as
# level2/66_Matmul_Dropout_Softmax does, and a ModelNew that draws the same way.
KB_DROPOUT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, dropout, then softmax over the features."""

    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.linear(x)), dim=1)


batch_size = 16
in_features = 64
out_features = 32
dropout_p = 0.3


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
'''
KB_DROPOUT_NEW = """import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = dropout_p

    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias)
        return torch.softmax(F.dropout(y, p=self.p, training=self.training), dim=1)
"""


@pytest.mark.harness
def test_a_kernelbench_file_with_dropout_imports_seeded_and_its_model_new_passes(tmp_path) -> None:
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.interop.kernelbench import import_file
    from gpuarena.problems import load_problem
    from gpuarena.solutions import load_solution

    path = tmp_path / "level2" / "66_Linear_Dropout_Softmax.py"
    path.parent.mkdir()
    path.write_text(KB_DROPOUT)
    outcome = import_file(path, tmp_path / "out", check_device="cpu")  # gpuarena check ran, and passed
    assert outcome.status == "imported", outcome.messages
    (toml,) = (tmp_path / "out").rglob("problem.toml")
    assert "seeded_calls = true" in toml.read_text()
    new = tmp_path / "model_new.py"
    new.write_text(KB_DROPOUT_NEW)
    record = evaluate(load_problem(toml.parent), load_solution(new), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", record.reason + record.log[-2000:]


@pytest.mark.harness
def test_profile_mode_seeds_both_sides_calls_alike(tmp_path) -> None:
    """Profile mode runs each side in a process of its own under ncu (here a stand-in): the
    profiled call is checked against the reference, both seeded as the judge seeds them."""
    from gpuarena.harness.profile.run import run_profile
    from gpuarena.problems import load_problem
    from gpuarena.solutions import load_solution

    fake_ncu = make_fake_ncu(tmp_path)
    problem, solution = load_problem(DROPOUT), load_solution(_solution(tmp_path, SAME_DRAWS))
    record = run_profile(problem, solution, "cpu", tmp_path / "out", timeout_s=300, ncu=fake_ncu)
    assert record.status == "PASSED", record.reason
    wrong = run_profile(
        problem, load_solution(_solution(tmp_path, OTHER_DRAWS)), "cpu", tmp_path / "o2", timeout_s=300, ncu=fake_ncu
    )
    assert wrong.status == "WRONG_VALUES", wrong.reason


@pytest.mark.parametrize(
    ("forward", "draws"),
    [
        ("dropout", True),
        ("randn", True),
        ("bernoulli", True),
        ("dropout in eval", False),
        ("none", False),
    ],
)
def test_a_forward_probed_on_meta_alone_is_seeded_where_it_calls_a_random_operation(forward, draws) -> None:
    """A GPU-sized KernelBench file is probed on the meta device alone, where nothing is drawn:
    a call of an operation that would draw (one taking a Generator, or a dropout that trains)
    says its calls must be seeded, so its problem.toml says `seeded_calls = true` before any GPU
    run (before, such a file was written without it, and its first GPU run's check found the
    reference nondeterministic)."""
    import torch
    import torch.nn.functional as F

    from gpuarena.interop.kernelbench_forward import probed_forward

    def run():
        x = torch.ones(4, 8)
        if forward == "dropout":
            return [F.dropout(x, p=0.5, training=True)]
        if forward == "randn":
            return [x + torch.randn(4, 8)]
        if forward == "bernoulli":
            return [x * torch.bernoulli(torch.full((4, 8), 0.5))]
        if forward == "dropout in eval":
            return [F.dropout(x, p=0.5, training=False)]
        return [x * 2]

    with torch.device("meta"):
        outputs, seeded = probed_forward(run, "meta")
    assert outputs[0].device.type == "meta" and seeded is draws
