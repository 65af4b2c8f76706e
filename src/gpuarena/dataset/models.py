"""Built-in models to harvest from, with seeded random weights (no download): the operators and
shapes of a Llama-style decoder come from its architecture and sizes, not from its trained weights.

MODEL names: `tiny-llama`, `small-llama`, `llama:dim=128,layers=2,heads=4,vocab=512,ffn=344`
(any of the sizes), or `hf:<ModelClass>[:size=full][,key=value...]` (a transformers model, prefill
only, where transformers is installed: tiny sizes, or the config class's own, a published model's).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from gpuarena.errors import GpuarenaError


@dataclass(frozen=True)
class LlamaConfig:
    dim: int = 64
    layers: int = 2
    heads: int = 4
    vocab: int = 256
    ffn: int = 176
    """SwiGLU hidden size (Llama: about 8/3 dim, rounded up)."""
    eps: float = 1e-5
    rope_base: float = 10000.0


PRESETS = {
    "tiny-llama": LlamaConfig(),
    "small-llama": LlamaConfig(dim=256, layers=4, heads=8, vocab=2048, ffn=688),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate pairs (first half, second half) of each head by position-dependent angles; x is [b, s, h, hd]."""
    half = x.shape[-1] // 2
    freqs = base ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    cos, sin = angles.cos().to(x.dtype)[:, None, :], angles.sin().to(x.dtype)[:, None, :]  # [s, 1, half]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.c = c
        self.attn_norm, self.mlp_norm = RMSNorm(c.dim, c.eps), RMSNorm(c.dim, c.eps)
        self.qkv = nn.Linear(c.dim, 3 * c.dim, bias=False)
        self.o = nn.Linear(c.dim, c.dim, bias=False)
        self.gate_up = nn.Linear(c.dim, 2 * c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.dim, bias=False)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None
    ) -> torch.Tensor:
        b, s, _ = x.shape
        h, hd = self.c.heads, self.c.dim // self.c.heads
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, h, hd).unbind(2)
        q, k = rotary(q, positions, self.c.rope_base), rotary(k, positions, self.c.rope_base)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, h, s, hd]
        if cache is not None:  # decode: the new token's keys and values after the cached ones
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        if s > 1:  # causal mask (prefill); one new token sees the whole cache
            mask = torch.ones(s, k.shape[2], dtype=torch.bool, device=x.device).tril(k.shape[2] - s)
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, -1))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)


class Llama(nn.Module):
    """A Llama-style decoder: embedding, blocks (RMSNorm, rotary, softmax attention, SwiGLU), LM head."""

    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(
        self, tokens: torch.Tensor, start: int = 0, caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    ) -> torch.Tensor:
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, positions, caches[i] if caches else None)
        return self.head(self.norm(x))


def _init(model: nn.Module, generator: torch.Generator) -> None:
    """Seeded weights of sensible scale; norm weights near 1 but not constant (a constant input
    would make a poor problem)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=generator, device=p.device))
            else:
                fan_in = p.shape[-1] if p.dim() > 1 and "embed" not in name else 1
                p.copy_(torch.randn(p.shape, generator=generator, device=p.device) / math.sqrt(fan_in))


BIAS_DEVIATION = 0.1
"""The deviation a zero-initialised parameter (a bias, Gemma's norm weight used as 1 + w) is drawn at."""
SCALE_FLOOR = 1.0
"""The least size a constant non-zero parameter (a norm's weight, a layer scale) is drawn near:
ConvNeXt's layer scale starts at 1e-6, and even at 0.1 each ConvNeXt layer's branch stayed
within bfloat16's tolerance of its input, so the check found layers returning their input."""


def vary_constants(net: nn.Module, generator: torch.Generator) -> list[str]:
    """Redraw every floating parameter whose elements are all equal, and a batch norm's running
    statistics, as a trained model's are: not constant. transformers initialises biases to zeros,
    LayerNorm and BatchNorm weights to ones, running means and variances to 0 and 1, ConvNeXt's
    layer scale to 1e-6; with them a harvest's check found outputs that do not depend on a bias
    (a fresh bias leaves a LayerNorm or a biased linear within tolerance) and layers that return
    their input, so BERT's, ViT's and StarCoder2's LayerNorms and biased linears were dropped.
    A zero becomes a normal of deviation BIAS_DEVIATION; a constant c becomes c (at least
    SCALE_FLOOR in size) times 1 + a normal of deviation 0.1, so a norm's weight stays near 1 and
    a variance positive. One-element parameters (a scale such as CLIP's logit_scale) and integer
    buffers stay. Returns the names redrawn."""
    redrawn: list[str] = []
    tensors: list[tuple[str, torch.Tensor]] = list(net.named_parameters())
    for mod_name, module in net.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            for buf in ("running_mean", "running_var"):
                value = getattr(module, buf, None)
                if isinstance(value, torch.Tensor):
                    tensors.append((f"{mod_name}.{buf}" if mod_name else buf, value))
    with torch.no_grad():
        for name, t in tensors:
            if not t.is_floating_point() or t.numel() < 2:
                continue
            first = t.reshape(-1)[0]
            if not bool((t == first).all()):
                continue
            c = float(first)
            noise = torch.randn(t.shape, generator=generator).to(t.device, torch.float32)
            if c == 0:
                values = BIAS_DEVIATION * noise
            else:
                size = max(abs(c), SCALE_FLOOR)
                values = math.copysign(size, c) * (1 + 0.1 * noise)
            t.copy_(values.to(t.dtype))
            redrawn.append(name)
    return redrawn


def parse_llama(name: str) -> LlamaConfig:
    if name in PRESETS:
        return PRESETS[name]
    if not name.startswith("llama:"):
        known = ", ".join([*PRESETS, "llama:dim=..,layers=..", "hf:<ModelClass>"])
        raise GpuarenaError(f"unknown model {name!r}; use one of {known}")
    sizes: dict[str, Any] = {}
    fields = LlamaConfig.__dataclass_fields__
    for item in filter(None, name.removeprefix("llama:").split(",")):
        key, _, value = item.partition("=")
        if key not in fields:
            raise GpuarenaError(f"model {name!r}: unknown size {key!r}; known: {', '.join(fields)}")
        try:
            sizes[key] = float(value) if key in ("eps", "rope_base") else int(value)
        except ValueError:
            raise GpuarenaError(f"model {name!r}: {key}={value!r} is not a number") from None
    config = replace(LlamaConfig(), **sizes)
    if config.dim % config.heads or (config.dim // config.heads) % 2:
        raise GpuarenaError(f"model {name!r}: dim must split into heads of even size")
    return config


@dataclass
class Workload:
    """A model ready to run one phase: forward() is what the recorder times."""

    forward: Callable[[], Any]
    sizes: dict[str, int]
    """The phase's sizes as given: batch and seq (prefill) or batch and context (decode)."""
    net: nn.Module | None = None
    """The model: its submodules' calls become fusion candidates (dataset/graph.py)."""


def build(
    model: str,
    phase: str,
    batch: int,
    seq: int,
    context: int,
    device: str = "cpu",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> Workload:
    """The model with seeded weights and inputs for the phase: prefill runs `seq` tokens per
    sequence; decode runs one new token against a KV cache of `context` tokens."""
    if phase not in ("prefill", "decode"):
        raise GpuarenaError(f"--phase {phase!r}: use prefill or decode")
    generator = torch.Generator().manual_seed(seed)
    if model.startswith("hf:"):
        return _hf(model.removeprefix("hf:"), phase, batch, seq, context, device, generator, dtype)
    config = parse_llama(model)
    # drawn on the device: a 7B model's weights and KV caches take minutes from a CPU generator
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):
        net = Llama(config)
    _init(net, generator)
    net = net.to(dtype=dtype).eval()
    if phase == "prefill":
        tokens = torch.randint(0, config.vocab, (batch, seq), generator=generator, device=device)
        return Workload(lambda: net(tokens), {"batch": batch, "seq": seq}, net)
    tokens = torch.randint(0, config.vocab, (batch, 1), generator=generator, device=device)
    shape = (batch, config.heads, context, config.dim // config.heads)
    caches = [
        (
            torch.randn(shape, generator=generator, device=device, dtype=dtype),
            torch.randn(shape, generator=generator, device=device, dtype=dtype),
        )
        for _ in range(config.layers)
    ]
    return Workload(lambda: net(tokens, start=context, caches=caches), {"batch": batch, "context": context}, net)


TINY_HF_SIZES = {
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 256,
}
"""The sizes of `hf:<ModelClass>` without `size=full`: small enough for a CPU test. Only the
sizes the config class has are set (a ViT has no vocabulary)."""


def _number(value: str) -> int | float | None:
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


def _hf_value(spec: str, key: str, value: str) -> Any:
    """A size (int or float), a switch (true/false: BEiT's use_relative_position_bias) or a list
    of them or of words, `|` between items (ConvNeXt's depths=3|3|27|3, DeBERTa's pos_att_type=p2c|c2p).
    A key written `+key` is an attribute the config class does not declare but its model reads
    (DeBERTa-v3's position_buckets): it may also be a word."""
    if value in ("true", "false"):
        return value == "true"
    if "|" in value:
        return [item if (n := _number(item)) is None else n for item in value.split("|")]
    number = _number(value)
    if number is None and key.startswith("+"):
        return value  # an attribute the config class does not declare: any word (DeBERTa's norm_rel_ebd=layer_norm)
    if number is None:
        raise GpuarenaError(f"hf:{spec}: {key}={value!r} is not a number (nor true, false or a list a|b)")
    return number


def parse_hf(spec: str) -> tuple[str, bool, dict[str, Any]]:
    """`ModelClass[:size=full|tiny][,key=value...]` -> (class name, full size?, config overrides).
    `size=full` keeps the config class's own defaults, which transformers sets to a published
    model's sizes (LlamaConfig: Llama-2-7B; MistralConfig: Mistral-7B; Qwen2MoeConfig: Qwen1.5-MoE-A2.7B)."""
    name, _, rest = spec.partition(":")
    full = False
    overrides: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise GpuarenaError(f"hf:{spec}: {item!r} is not key=value")
        if key == "size":
            if value not in ("full", "tiny"):
                raise GpuarenaError(f"hf:{spec}: size={value!r}: use full (the config's own sizes) or tiny")
            full = value == "full"
            continue
        overrides[key] = _hf_value(spec, key, value)
    return name, full, overrides


def _hf(
    spec: str,
    phase: str,
    batch: int,
    seq: int,
    context: int,
    device: str,
    generator: torch.Generator,
    dtype: torch.dtype,
) -> Workload:
    """A transformers model built from a config of its own config class: tiny sizes, or with
    `size=full` the class's defaults, the published model's; weights seeded, made on the device.
    Decode: the context is prefilled once (not recorded) into the model's KV cache, and each
    recorded forward first cuts the cache back to it, so every forward attends over `context`
    tokens and appends one, as the first did."""
    try:
        import transformers
    except ImportError:
        raise GpuarenaError("hf: models need the transformers package (pip install transformers)") from None
    cls_name, full, overrides = parse_hf(spec)
    cls = getattr(transformers, cls_name, None)
    if cls is None or not hasattr(cls, "config_class"):
        raise GpuarenaError(f"hf:{cls_name}: transformers has no model class of that name")
    defaults = cls.config_class()
    unknown = [key for key in overrides if not key.startswith("+") and not hasattr(defaults, key)]
    if unknown:
        raise GpuarenaError(f"hf:{spec}: {type(defaults).__name__} has no {', '.join(map(repr, unknown))}")
    sizes = {
        key.removeprefix("+"): value
        for key, value in {**({} if full else TINY_HF_SIZES), **overrides}.items()
        if key.startswith("+") or hasattr(defaults, key)
    }
    config = cls.config_class(**sizes)  # through the constructor: it derives sizes (head_dim) from these
    vocab = getattr(config, "vocab_size", None)
    if isinstance(getattr(config, "pad_token_id", None), int) and vocab and config.pad_token_id >= vocab:
        config.pad_token_id = None  # a published model's padding id, out of a tiny vocabulary
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (), generator=generator)))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters made in the run's dtype, on the device: a 7B model in seconds
    try:
        with torch.device(device):
            net = cls(config).eval()
    finally:
        torch.set_default_dtype(previous)
    vary_constants(net, generator)
    inputs = inspect.signature(net.forward).parameters
    if "input_ids" not in inputs or "decoder_input_ids" in inputs:
        if phase != "prefill":
            raise GpuarenaError(f"{cls_name}: decode needs a generating model (a decoder-only model with a KV cache)")
        return _hf_prefill(net, config, inputs, batch, seq, device, generator, dtype)
    if phase == "prefill":
        tokens = torch.randint(0, config.vocab_size, (batch, seq), generator=generator).to(device)
        return Workload(lambda: net(input_ids=tokens), {"batch": batch, "seq": seq}, net)
    return _hf_decode(net, config.vocab_size, batch, context, device, generator)


def _hf_prefill(
    net: nn.Module,
    config: Any,
    inputs: Any,
    batch: int,
    seq: int,
    device: str,
    generator: torch.Generator,
    dtype: torch.dtype,
) -> Workload:
    """The prefill of a model that takes more than tokens, by what its forward takes: pixels
    (`--batch` images of the config's size, 224 where it names none, as ResNet's and ConvNeXt's
    do), a spectrogram (Whisper: `--batch` clips of the encoder's fixed length, its 3000 frames),
    raw audio (Wav2Vec2: `--seq` frames of the feature encoder, each its total stride of samples,
    320 at 16 kHz) and, for an encoder-decoder (T5, BART, Whisper), `--seq` tokens into the
    decoder too (T5's and BART's encoders take `--seq` tokens)."""
    kwargs: dict[str, torch.Tensor] = {}
    sizes = {"batch": batch}
    if "pixel_values" in inputs and "input_ids" not in inputs:
        image = getattr(config, "image_size", 224)  # ResNet and ConvNeXt configs name none: ImageNet's
        size = image if isinstance(image, int) else image[0]
        channels = getattr(config, "num_channels", 3)
        kwargs["pixel_values"] = torch.randn((batch, channels, size, size), generator=generator).to(device, dtype)
        sizes["image_size"] = size
    elif "input_features" in inputs:  # Whisper: log-mel frames, two per encoder position
        frames = 2 * config.max_source_positions
        mels = torch.randn((batch, config.num_mel_bins, frames), generator=generator)
        kwargs["input_features"] = mels.to(device, dtype)
        sizes["frames"] = frames
    elif "input_values" in inputs:  # Wav2Vec2: samples of a 16 kHz waveform
        samples = seq * math.prod(getattr(config, "conv_stride", [1]))
        kwargs["input_values"] = torch.randn((batch, samples), generator=generator).to(device, dtype)
        sizes["seq"] = seq
    elif "input_ids" in inputs:
        kwargs["input_ids"] = torch.randint(0, config.vocab_size, (batch, seq), generator=generator).to(device)
        sizes["seq"] = seq
    else:
        raise GpuarenaError(
            f"{type(net).__name__}: its forward takes none of input_ids, pixel_values, input_features, input_values"
        )
    if "decoder_input_ids" in inputs:
        vocab = getattr(config, "decoder_vocab_size", None) or config.vocab_size
        kwargs["decoder_input_ids"] = torch.randint(0, vocab, (batch, seq), generator=generator).to(device)
        sizes["seq"] = seq
    return Workload(lambda: net(**kwargs), sizes, net)


def _hf_decode(
    net: nn.Module, vocab: int, batch: int, context: int, device: str, generator: torch.Generator
) -> Workload:
    if not hasattr(net, "generate"):
        raise GpuarenaError(f"{type(net).__name__}: decode needs a generating model (a decoder with a KV cache)")
    prompt = torch.randint(0, vocab, (batch, context), generator=generator).to(device)
    token = torch.randint(0, vocab, (batch, 1), generator=generator).to(device)
    with torch.no_grad():
        cache = net(input_ids=prompt, use_cache=True).past_key_values
    if cache is None or not hasattr(cache, "crop"):
        raise GpuarenaError(f"{type(net).__name__}: its forward returned no KV cache that can be cut back")
    name = "cache" if "cache" in inspect.signature(net.forward).parameters else "past_key_values"

    def forward() -> Any:
        extra = cache.get_seq_length() - context
        if extra:
            cache.crop(-extra)  # back to the context: each forward appends the same one token
        return net(input_ids=token, use_cache=True, **{name: cache})

    return Workload(forward, {"batch": batch, "context": context}, net)
