"""KernelBench level 4, past GPT-2: models whose forward reads scalars from its data (BART's and
BigBird's "is any token padding"), which the meta device cannot run, still get a CPU workload,
sized by what the forward returns and not by its tokens alone; a forward that draws random
numbers (Reformer's LSH attention past its chunk) is refused naming that cause.

The files here are written for these tests in the shape of KernelBench's level-4 files, naming
tiny models put in gpuarena's table for the test (HUB_MODELS), so they run in seconds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch

from gpuarena.interop.kernelbench import CPU_MAX_ELEMENTS, import_file
from gpuarena.interop.kernelbench_forward import RandomForward, meta_scalars_as_zero, probed_forward
from gpuarena.interop.kernelbench_hf import HUB_MODELS, HubModel

pytest.importorskip("transformers")

TINY_BART = HubModel(
    model_type="bart",
    fields=dict(
        vocab_size=4096,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    ),
    cpu=dict(encoder_layers=1, decoder_layers=1, vocab_size=128),
)

LEVEL4_FILE = '''import torch
from transformers import AutoConfig, AutoModelForCausalLM


class Model(torch.nn.Module):
    """Next-token logits of a small encoder-decoder (written for gpuarena's tests)."""

    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, tokens):
        return self.model(tokens).logits


model_name = "gpuarena-tests/tiny-bart"
config = AutoConfig.from_pretrained(model_name)
vocab_size = config.vocab_size
sequence_length = 32
batch_size = 512


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, sequence_length))]


def get_init_inputs():
    return [model_name, config]
'''


@pytest.fixture
def tiny_bart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(HUB_MODELS, "gpuarena-tests/tiny-bart", TINY_BART)
    path = tmp_path / "level4" / "1_tiny-bart_bs512_seq32.py"
    path.parent.mkdir()
    path.write_text(LEVEL4_FILE)
    return path


def test_a_forward_reading_scalars_on_meta_is_sized_by_its_outputs_for_the_cpu(tiny_bart, tmp_path):
    """BART asks whether any token is padding (a scalar read), so its forward cannot run on meta.
    Its 16k tokens are under the cap, its logits (16k x 128 at the CPU's vocabulary) are not:
    sizing the CPU workload by its tokens alone left it over the cap, and the file unimported."""
    with pytest.raises(RuntimeError, match="meta"), torch.device("meta"):
        bool(torch.zeros(2).any())  # what the meta device does with such a read
    outcome = import_file(tiny_bart, tmp_path / "out", check_device="cpu")
    assert outcome.status == "imported", outcome.messages
    full, small = tomllib.loads((outcome.folder / "problem.toml").read_text())["workloads"]
    assert full["axes"]["batch_size"] == 512 and full["devices"] == ["cuda"]
    axes = small["axes"]
    assert axes["hf_vocab_size"] == 128 and axes["hf_encoder_layers"] == 1 and "cpu" in small["devices"]
    tokens = axes["batch_size"] * axes["sequence_length"]
    assert tokens * (1 + axes["hf_vocab_size"]) <= CPU_MAX_ELEMENTS < 2 * tokens * (1 + axes["hf_vocab_size"])


def test_scalars_read_on_meta_are_zero_only_inside_the_block():
    with torch.device("meta"):
        flags = torch.ones(3, dtype=torch.bool)
        with meta_scalars_as_zero() as (reads, _):
            assert bool(flags.any()) is False and float(flags.float().sum()) == 0.0
        assert len(reads) == 2
        with pytest.raises(RuntimeError):
            bool(flags.any())
    assert bool(torch.ones(1).bool().any())  # a real tensor's value is read as ever


TINY_REFORMER = HubModel(
    model_type="reformer",
    fields=dict(
        vocab_size=64,
        hidden_size=16,
        num_attention_heads=2,
        attention_head_size=8,
        num_hidden_layers=2,
        attn_layers=["local", "lsh"],
        feed_forward_size=32,
        num_hashes=1,
        num_buckets=4,
        hash_seed=None,  # as published: rotations drawn anew in each forward
        lsh_attn_chunk_length=4,
        local_attn_chunk_length=4,
        max_position_embeddings=32,
        axial_pos_shape=[4, 8],
        axial_pos_embds_dim=[8, 8],
        is_decoder=True,
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=2,
    ),
    cpu=dict(num_hidden_layers=2),
)


def test_a_forward_drawing_random_numbers_is_judged_with_its_calls_seeded(monkeypatch, tmp_path):
    """Reformer's LSH attention draws its hash rotations in each forward, past its chunk length:
    the check found only "reference() is not deterministic", then the import refused it; now the
    problem says `seeded_calls = true` and passes its check (torch's generators are seeded before
    every call, the reference's and the solution's alike)."""
    monkeypatch.setitem(HUB_MODELS, "gpuarena-tests/tiny-reformer", TINY_REFORMER)
    source = LEVEL4_FILE.replace("gpuarena-tests/tiny-bart", "gpuarena-tests/tiny-reformer")
    path = tmp_path / "level4" / "2_tiny-reformer_bs2_seq16.py"
    path.parent.mkdir()
    path.write_text(source.replace("sequence_length = 32", "sequence_length = 16").replace("= 512", "= 2"))
    outcome = import_file(path, tmp_path / "out", check_device="cpu")
    assert outcome.status == "imported", outcome.messages
    assert "seeded_calls = true" in _toml(tmp_path / "out")
    shorter = path.with_name("3_tiny-reformer_bs2_seq4.py")  # within one chunk: no hashing, no seed
    shorter.write_text(path.read_text().replace("sequence_length = 16", "sequence_length = 4"))
    outcome = import_file(shorter, tmp_path / "out4", check_device="cpu")
    assert outcome.status == "imported", outcome.messages
    assert "seeded_calls" not in _toml(tmp_path / "out4")


def _toml(out):
    (found,) = out.rglob("problem.toml")
    return found.read_text()


def test_a_forward_drawing_from_torch_is_seeded_and_one_drawing_elsewhere_is_refused():
    def drawn_and_discarded():
        torch.rand(3)
        return [torch.tensor([1.0, float("nan")])]  # NaN where NaN counts as the same

    outputs, seeded = probed_forward(drawn_and_discarded, "cpu")
    assert outputs[0].shape == (2,) and not seeded
    assert probed_forward(lambda: [torch.rand(3)], "cpu")[1]  # judged with its calls seeded
    clock = __import__("itertools").count()
    with pytest.raises(RandomForward, match="cannot seed"):  # a source no seed of torch's fixes
        probed_forward(lambda: [torch.rand(3) + next(clock)], "cpu")
