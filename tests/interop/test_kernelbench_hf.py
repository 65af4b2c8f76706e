"""KernelBench's level 4 (Hugging Face models) imported offline: the config and the model a file
asks the hub for are built from gpuarena's table of published configs with seeded random
weights, the file's own workload is GPU-only, and the CPU checks the same architecture smaller.

The fixtures under fixtures/kernelbench_hf/ are level-4-format files written for these tests."""

from __future__ import annotations

import tomllib

import pytest
import torch

import gpuarena.solution_readers  # noqa: F401  registers every format's reader
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.problem_check import check_problem
from gpuarena.interop.kernelbench import CPU_MAX_PARAMETERS, import_file
from gpuarena.interop.kernelbench_hf import HUB_MODELS, decode_init, encode_init, hub_axes, offline_hub
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

from .conftest import FIXTURES

pytest.importorskip("transformers")

HF = FIXTURES / "kernelbench_hf"
GPT2 = HF / "level4" / "1_gpt2_bs1_seq8.py"


@pytest.fixture(scope="module")
def gpt2_problem(tmp_path_factory):
    outcome = import_file(GPT2, tmp_path_factory.mktemp("kb4"), check_device="cpu")
    assert outcome.status == "imported", outcome.messages
    return outcome


def test_a_level4_file_imports_offline_with_a_cpu_workload_of_the_same_architecture(gpt2_problem):
    assert gpt2_problem.workloads == ["kernelbench", "cpu-small"]
    spec = tomllib.loads((gpt2_problem.folder / "problem.toml").read_text())
    full, small = spec["workloads"]
    # the file's own sizes with the published config's: GPT-2's 124M parameters are GPU-sized
    assert full["axes"] == {"batch_size": 1, "sequence_length": 8, "hf_n_layer": 12, "hf_vocab_size": 50257}
    assert full["devices"] == ["cuda"]
    assert small["axes"] == {"batch_size": 1, "sequence_length": 8, "hf_n_layer": 1, "hf_vocab_size": 512}
    assert small["devices"] == ["cpu", "cuda"]
    assert spec["requires"] == ["transformers"]  # not a gpuarena dependency: a machine without it says so
    assert check_problem(gpt2_problem.folder, device="cpu").ok


def test_the_reference_builds_the_model_seeded_and_leaves_transformers_unpatched(gpt2_problem):
    from transformers import AutoConfig, AutoModelForCausalLM

    before = (AutoConfig.__dict__["from_pretrained"], AutoModelForCausalLM.__dict__["from_pretrained"])
    problem = load_problem(gpt2_problem.folder)
    workload = next(w for w in problem.spec.workloads if w.name == "cpu-small")
    outputs = []
    for _ in range(2):
        inputs = problem.make_inputs(
            workload.axes, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1)
        )
        outputs.append(problem.reference(**inputs))
    assert outputs[0].shape == (1, 8, 512) and torch.equal(outputs[0], outputs[1])
    assert (AutoConfig.__dict__["from_pretrained"], AutoModelForCausalLM.__dict__["from_pretrained"]) == before


@pytest.mark.harness
def test_a_level4_model_new_solution_runs_unmodified(gpt2_problem):
    """In the worker's sandbox, with no hub: the adapter builds ModelNew's model from the config
    the problem passes, seeded as the reference's; a copy of Model passes."""
    solution = load_solution(HF / "solutions" / "gpt2_new.py")
    record = evaluate(load_problem(gpt2_problem.folder), solution, RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", record.reason


def test_a_model_not_in_the_table_is_refused_in_one_line_naming_it(tmp_path):
    source = GPT2.read_text().replace('model_name = "gpt2"', 'model_name = "someone/unpublished-model"')
    path = tmp_path / "level4" / "2_unknown.py"
    path.parent.mkdir()
    path.write_text(source)
    outcome = import_file(path, tmp_path / "out", check_device="cpu")
    assert outcome.status == "error"
    assert "'someone/unpublished-model'" in outcome.messages[0] and "offline" in outcome.messages[0]
    assert len(outcome.messages[0].splitlines()) == 1


@pytest.mark.parametrize("name", sorted(HUB_MODELS))
def test_the_table_builds_each_model_offline_and_its_cpu_sizes_fit_the_cpu(name):
    """On meta: no weights are made. The published sizes give the published parameter counts."""
    published = {
        "gpt2": 124e6,
        "EleutherAI/gpt-neo-2.7B": 2.65e9,
        "facebook/opt-1.3b": 1.32e9,
        "google/bigbird-roberta-base": 128e6,
        "google/electra-small-discriminator": 13.5e6,
        "google/reformer-enwik8": 149e6,
        "facebook/bart-large": 254e6,  # AutoModelForCausalLM: BART's decoder and LM head
    }
    from transformers import AutoConfig, AutoModelForCausalLM

    counts = []
    for cpu in (False, True):
        with offline_hub(hub_axes({name: HUB_MODELS[name]}, cpu=cpu)), torch.device("meta"):
            config = decode_init(encode_init([AutoConfig.from_pretrained(name)]))[0]
            model = AutoModelForCausalLM.from_pretrained(name, config=config)
        assert not model.training  # as from_pretrained leaves it: no dropout
        counts.append(sum(p.numel() for p in model.parameters()))
    assert abs(counts[0] / published[name] - 1) < 0.01
    assert counts[1] <= CPU_MAX_PARAMETERS
