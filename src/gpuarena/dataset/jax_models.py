"""JAX models to harvest from, with seeded random weights (no download).

MODEL names: `jax:tiny-llama` (a Llama-style decoder written here in plain JAX, each layer in a
named scope: the CI's), and `jax:keras:<Backbone>[,key=value...]` (a KerasHub backbone on Keras's
JAX backend, where keras-hub is installed: LlamaBackbone, GemmaBackbone, MistralBackbone... at
small sizes unless the keys say otherwise). Prefill only: token ids of batch x seq.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuarena.errors import GpuarenaError

KERAS_SIZES: dict[str, dict[str, int]] = {
    "LlamaBackbone": dict(
        vocabulary_size=512,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=128,
        intermediate_dim=344,
    ),
    "MistralBackbone": dict(
        vocabulary_size=512,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=128,
        intermediate_dim=344,
    ),
    "GemmaBackbone": dict(
        vocabulary_size=512,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=1,
        hidden_dim=128,
        intermediate_dim=512,
        head_dim=32,
    ),
}
"""Small sizes of the KerasHub backbones known here (any backbone takes key=value sizes)."""


@dataclass
class JaxWorkload:
    forward: Callable[..., Any]
    arguments: list[Any]
    sizes: dict[str, int]


def build_jax(model: str, phase: str, batch: int, seq: int, seed: int = 0, dtype: str = "float32") -> JaxWorkload:
    """The model's prefill forward and its arguments (token ids, and a padding mask where the
    model takes one)."""
    if phase != "prefill":
        raise GpuarenaError(f"{model}: JAX models are harvested in prefill only (--phase prefill)")
    if model == "jax:tiny-llama":
        return _tiny_llama(batch, seq, seed, dtype)
    if model.startswith("jax:keras:"):
        return _keras(model.removeprefix("jax:keras:"), batch, seq, seed, dtype)
    raise GpuarenaError(f"unknown JAX model {model!r}: jax:tiny-llama or jax:keras:<Backbone>[,key=value...]")


SCALED_KEYS = ("hidden_dim", "intermediate_dim", "vocabulary_size", "head_dim", "sliding_window")
"""A KerasHub backbone's sizes that a layer's shapes scale with (its heads and depth do not)."""


def halved_jax(
    model: str, phase: str, batch: int, seq: int, seed: int = 0, dtype: str = "float32"
) -> JaxWorkload | None:
    """The model at half its sizes (widths, vocabulary, window, tokens; two layers at most, the
    same heads), or None where a size is odd: a harvest traces it to tell which numbers of its
    layers' references are sizes (dataset/jax_sizes.py)."""
    if seq % 2:
        return None
    if model == "jax:tiny-llama":
        return _tiny_llama(batch, seq // 2, seed, dtype, dim=32, ffn=88, vocab=128)
    name, *items = model.removeprefix("jax:keras:").split(",")
    sizes = dict(KERAS_SIZES.get(name, {}))
    for key, _, value in (item.partition("=") for item in items):
        if not value.isdigit():
            return None  # build_jax says why
        sizes[key] = int(value)
    if any(sizes[k] % 2 for k in SCALED_KEYS if k in sizes):
        return None
    halved = {
        **sizes,
        **{k: sizes[k] // 2 for k in SCALED_KEYS if k in sizes},
        "num_layers": min(sizes.get("num_layers", 2), 2),
    }
    try:
        return _keras(",".join([name, *(f"{k}={v}" for k, v in halved.items())]), batch, seq // 2, seed, dtype)
    except GpuarenaError:
        return None  # a backbone its halved sizes do not build: its layers stay unsized


def _tiny_llama(
    batch: int,
    seq: int,
    seed: int,
    dtype: str,
    dim: int = 64,
    layers: int = 2,
    heads: int = 4,
    vocab: int = 256,
    ffn: int = 176,
) -> JaxWorkload:
    import jax
    import jax.numpy as jnp

    kind = jnp.dtype(dtype)
    keys = iter(jax.random.split(jax.random.key(seed), 4 + 8 * layers))

    def weight(*shape: int) -> Any:
        return (jax.random.normal(next(keys), shape) / shape[0] ** 0.5).astype(kind)

    params = {
        "embed": weight(vocab, dim),
        "norm": jnp.ones(dim, kind),
        "head": weight(dim, vocab),
        "layers": [
            {
                "attn_norm": jnp.ones(dim, kind),
                "q": weight(dim, dim),
                "k": weight(dim, dim),
                "v": weight(dim, dim),
                "o": weight(dim, dim),
                "mlp_norm": jnp.ones(dim, kind),
                "gate": weight(dim, ffn),
                "up": weight(dim, ffn),
                "down": weight(ffn, dim),
            }
            for _ in range(layers)
        ],
    }

    def rms_norm(x: Any, scale: Any) -> Any:
        wide = x.astype(jnp.float32)
        wide = wide * jax.lax.rsqrt(jnp.mean(wide * wide, axis=-1, keepdims=True) + 1e-5)
        return (wide * scale.astype(jnp.float32)).astype(x.dtype)

    def rotary(x: Any) -> Any:
        half = x.shape[-1] // 2
        freqs = 10000.0 ** (-jnp.arange(half, dtype=jnp.float32) / half)
        angles = jnp.arange(x.shape[1], dtype=jnp.float32)[:, None] * freqs[None, :]
        cos, sin = jnp.cos(angles)[:, None, :].astype(x.dtype), jnp.sin(angles)[:, None, :].astype(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    def forward(tokens: Any) -> Any:
        with jax.named_scope("tiny_llama"):
            h = params["embed"][tokens]
            b, s = tokens.shape
            for n, layer in enumerate(params["layers"]):
                with jax.named_scope(f"layer_{n}"):
                    with jax.named_scope("attention_norm"):
                        x = rms_norm(h, layer["attn_norm"])
                    with jax.named_scope("attention"):
                        q = rotary((x @ layer["q"]).reshape(b, s, heads, dim // heads))
                        k = rotary((x @ layer["k"]).reshape(b, s, heads, dim // heads))
                        v = (x @ layer["v"]).reshape(b, s, heads, dim // heads)
                        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (dim // heads) ** 0.5
                        causal = jnp.tril(jnp.ones((s, s), bool))
                        weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
                        h = h + (jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, dim) @ layer["o"])
                    with jax.named_scope("mlp_norm"):
                        x = rms_norm(h, layer["mlp_norm"])
                    with jax.named_scope("mlp"):
                        h = h + (jax.nn.silu(x @ layer["gate"]) * (x @ layer["up"])) @ layer["down"]
            with jax.named_scope("final_norm"):
                h = rms_norm(h, params["norm"])
            return h @ params["head"]

    tokens = jax.random.randint(jax.random.key(seed + 1), (batch, seq), 0, vocab)
    return JaxWorkload(forward, [tokens], {"batch": batch, "seq": seq})


def _keras(spec: str, batch: int, seq: int, seed: int, dtype: str) -> JaxWorkload:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if os.environ["KERAS_BACKEND"] != "jax":
        raise GpuarenaError(f"jax:keras:{spec}: KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}, not jax")
    try:
        import keras
        import keras_hub
    except ImportError as exc:
        raise GpuarenaError(f"jax:keras:{spec} needs keras and keras-hub ({exc})") from None
    import jax.numpy as jnp

    name, *items = spec.split(",")
    cls = getattr(keras_hub.models, name, None)
    if cls is None or not name.endswith("Backbone"):
        raise GpuarenaError(f"jax:keras:{spec}: {name!r} is not a KerasHub backbone (e.g. LlamaBackbone)")
    config: dict[str, Any] = dict(KERAS_SIZES.get(name, {}))
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.isdigit():
            raise GpuarenaError(f"jax:keras:{spec}: {item!r} is not key=<integer>")
        config[key] = int(value)
    keras.utils.set_random_seed(seed)
    try:
        net = cls(**config, dtype=dtype)
    except TypeError as exc:
        raise GpuarenaError(f"jax:keras:{spec}: {exc} (give its sizes as key=value)") from None
    vocab = int(config.get("vocabulary_size", 256))
    import numpy as np

    tokens = jnp.asarray(np.random.default_rng(seed).integers(0, vocab, (batch, seq)), dtype=jnp.int32)
    mask = jnp.ones((batch, seq), jnp.int32)

    def forward(token_ids: Any, padding_mask: Any) -> Any:
        return net({"token_ids": token_ids, "padding_mask": padding_mask})

    return JaxWorkload(forward, [tokens, mask], {"batch": batch, "seq": seq, **config})
