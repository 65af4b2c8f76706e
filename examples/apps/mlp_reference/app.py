"""Reference app (the "CUDA stack" side, written in torch): a seeded MLP over a batch, and a
greedy generation loop over a tiny random-weight model. Writes mlp_out.npy, probs.npy,
logits.npy and tokens.json into $GPUARENA_APP_OUTPUT and prints tokens_per_s."""

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

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


class Mlp(torch.nn.Module):
    def __init__(self, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(DIM, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, VOCAB)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.from_numpy(w["w1"].T.copy()))
            self.fc1.bias.copy_(torch.from_numpy(w["b1"]))
            self.fc2.weight.copy_(torch.from_numpy(w["w2"].T.copy()))
            self.fc2.bias.copy_(torch.from_numpy(w["b2"]))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(h)))


def main() -> None:
    seed = int(os.environ.get("GPUARENA_APP_SEED", "0"))
    out = Path(os.environ.get("GPUARENA_APP_OUTPUT", "."))
    device = torch.device(os.environ.get("GPUARENA_APP_DEVICE", "cpu"))
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    w = weights(seed)
    model = Mlp(w).to(device).eval()
    embed = torch.from_numpy(w["embed"]).to(device)
    with torch.no_grad():
        mlp_out = model(torch.from_numpy(w["x"]).to(device))
        probs = torch.softmax(mlp_out, dim=-1)
        tokens, logits = [1, 2, 3], []
        start = time.perf_counter()
        for _ in range(STEPS):
            h = embed[torch.tensor(tokens[-CONTEXT:], device=device)].mean(dim=0)
            step = model(h)
            logits.append(step)
            tokens.append(int(torch.argmax(step)))
        elapsed = time.perf_counter() - start
    np.save(out / "mlp_out.npy", mlp_out.cpu().numpy())
    np.save(out / "probs.npy", probs.cpu().numpy())
    np.save(out / "logits.npy", torch.stack(logits).cpu().numpy())
    (out / "tokens.json").write_text(json.dumps(tokens))
    print(f"tokens_per_s={STEPS / elapsed:.1f}")


if __name__ == "__main__":
    main()
