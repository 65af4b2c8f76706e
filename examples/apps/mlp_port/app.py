"""A port of mlp_reference to plain numpy (the "other stack"): the same computation, written
with matrix products instead of torch modules. Matches within the golden tolerances."""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

VOCAB, DIM, HIDDEN, BATCH, CONTEXT, STEPS = 64, 32, 64, 8, 4, 48


def weights(seed: int) -> dict[str, np.ndarray]:
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


def mlp(w: dict[str, np.ndarray], h: np.ndarray) -> np.ndarray:
    return np.tanh(h @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]


def softmax(z: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def main(seed: int, out: Path) -> None:
    w = weights(seed)
    mlp_out = mlp(w, w["x"])
    probs = softmax(mlp_out, axis=-1)
    tokens, logits = [1, 2, 3], []
    start = time.perf_counter()
    for _ in range(STEPS):
        step = mlp(w, w["embed"][tokens[-CONTEXT:]].mean(axis=0))
        logits.append(step)
        tokens.append(int(step.argmax()))
    elapsed = time.perf_counter() - start
    np.save(out / "mlp_out.npy", mlp_out.astype(np.float32))
    np.save(out / "probs.npy", probs.astype(np.float32))
    np.save(out / "logits.npy", np.stack(logits).astype(np.float32))
    (out / "tokens.json").write_text(json.dumps(tokens))
    print(f"tokens_per_s={STEPS / elapsed:.1f}")


if __name__ == "__main__":
    main(int(os.environ.get("GPUARENA_APP_SEED", "0")), Path(os.environ.get("GPUARENA_APP_OUTPUT", ".")))
    sys.exit(0)
