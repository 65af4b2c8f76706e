"""A Transformers decoder as an app: a small Llama configuration with seeded random weights (no
download), generating tokens greedily from a fixed prompt. The golden outputs are the prompt's
logits and the generated tokens; the performance figure is tokens per second of generation.

The weights are drawn on the CPU under the app's seed and then moved to the device, so every
stack starts from the same model; float32 with TF32 off, so a port is compared with the
reference's arithmetic, not with a cheaper one."""

import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

PROMPT = [1, 17, 42, 99, 7, 250, 3, 64]
NEW_TOKENS = 32


def model(seed: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        initializer_range=0.25,
    )  # wide weights: varied tokens, not one repeated
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def main() -> None:
    seed = int(os.environ.get("GPUARENA_APP_SEED", "0"))
    out = Path(os.environ.get("GPUARENA_APP_OUTPUT", "."))
    device = torch.device(os.environ.get("GPUARENA_APP_DEVICE", "cpu"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(1)
    llm = model(seed).to(device)
    prompt = torch.tensor([PROMPT], device=device)
    with torch.no_grad():
        logits = llm(prompt).logits[0]
        generate = dict(max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0, eos_token_id=None)
        llm.generate(prompt, **generate)  # warm-up: kernels, caches
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        tokens = llm.generate(prompt, **generate)[0].tolist()
        elapsed = time.perf_counter() - start
    np.save(out / "prompt_logits.npy", logits.float().cpu().numpy())
    (out / "tokens.json").write_text(json.dumps(tokens))
    print(f"tokens_per_s={NEW_TOKENS / elapsed:.1f}")


if __name__ == "__main__":
    main()
