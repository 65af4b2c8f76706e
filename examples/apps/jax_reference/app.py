"""A JAX model as the reference app (the track's "JAX to PyTorch" direction): the seeded MLP
and greedy generation loop of mlp_reference, written in JAX. `mlp_reference` (torch) is then its
PyTorch port, checked against this app's golden outputs. Writes mlp_out.npy, probs.npy,
logits.npy and tokens.json into $GPUARENA_APP_OUTPUT and prints tokens_per_s."""

import json
import os
import time
from pathlib import Path

import numpy as np

VOCAB, DIM, HIDDEN, BATCH, CONTEXT, STEPS = 64, 32, 64, 8, 4, 48


def weights(seed: int) -> dict[str, np.ndarray]:
    """The same random weights on every stack: drawn with numpy, in this order."""
    rng = np.random.default_rng(seed)
    draw = lambda *shape, scale=1.0: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    return {
        "embed": draw(VOCAB, DIM),
        "w1": draw(DIM, HIDDEN, scale=0.3),
        "b1": draw(HIDDEN, scale=0.1),
        "w2": draw(HIDDEN, VOCAB, scale=0.3),
        "b2": draw(VOCAB, scale=0.1),
        "x": draw(BATCH, DIM),
    }


def main() -> None:
    seed = int(os.environ.get("GPUARENA_APP_SEED", "0"))
    out = Path(os.environ.get("GPUARENA_APP_OUTPUT", "."))
    device = os.environ.get("GPUARENA_APP_DEVICE", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cuda" if device.startswith("cuda") else "cpu")
    jax.config.update("jax_default_matmul_precision", "highest")  # float32 products, no TF32
    w = {k: jnp.asarray(v) for k, v in weights(seed).items()}

    @jax.jit
    def mlp(h):
        return jnp.tanh(h @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]

    @jax.jit
    def step(context):
        return mlp(w["embed"][context].mean(axis=0))

    mlp_out = mlp(w["x"])
    probs = jax.nn.softmax(mlp_out, axis=-1)
    tokens, logits = [1, 2, 3], []
    step(jnp.asarray(tokens[-CONTEXT:])).block_until_ready()  # compiled before the clock starts
    start = time.perf_counter()
    for _ in range(STEPS):
        logit = step(jnp.asarray(tokens[-CONTEXT:]))
        logits.append(logit)
        tokens.append(int(jnp.argmax(logit)))
    elapsed = time.perf_counter() - start
    np.save(out / "mlp_out.npy", np.asarray(mlp_out, dtype=np.float32))
    np.save(out / "probs.npy", np.asarray(probs, dtype=np.float32))
    np.save(out / "logits.npy", np.stack([np.asarray(x) for x in logits]).astype(np.float32))
    (out / "tokens.json").write_text(json.dumps(tokens))
    print(f"tokens_per_s={STEPS / elapsed:.1f}")


if __name__ == "__main__":
    main()
