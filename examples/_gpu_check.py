# TEMPORARY (deleted after the device run): check the examples on a GPU.
import importlib.util, os, sys, time, torch
from pathlib import Path
from torch.utils import cpp_extension
import triton.testing

HERE = Path(__file__).resolve().parent / "softmax"
def load_py(name):
    spec = importlib.util.spec_from_file_location("ex_" + name, HERE / f"{name}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), flush=True)
t = time.time()
build = "/tmp/ext_build"; os.makedirs(build, exist_ok=True)
cu = cpp_extension.load(name="softmax_example", sources=[str(HERE / "cuda" / "softmax.cu")],
                        extra_cuda_cflags=["-O3", "--use_fast_math"], build_directory=build, verbose=False)
print(f"cuda ext built in {time.time()-t:.0f}s", flush=True)
tri, pt, broken = load_py("triton"), load_py("pytorch"), load_py("broken")
sols = {"pytorch": pt.solve, "triton": tri.solve, "cuda": cu.solve}
TOL = {torch.float32: (1e-4, 1e-4, 1e-4), torch.bfloat16: (2e-2, 2e-2, 1e-2), torch.float16: (1e-2, 1e-2, 5e-3)}
g = torch.Generator(device="cuda").manual_seed(0)

def mk(r, c, dt):
    x = torch.randn(r, c, generator=g, device="cuda")
    return (x * (1 + 3 * torch.rand((), generator=g, device="cuda")) + 0.5).to(dt)

def check(name, fn, x, chunk=4096):
    y = fn(x)
    assert y.dtype == x.dtype and y.shape == x.shape and y.is_contiguous(), (name, y.dtype, y.shape)
    atol, rtol, l2 = TOL[x.dtype]; worst = 0.0; ok = True
    for i in range(0, x.shape[0], chunk):
        ref = torch.softmax(x[i:i+chunk].float(), -1)
        out = y[i:i+chunk].float(); d = (out - ref).abs()
        worst = max(worst, d.max().item())
        ok &= bool((d <= atol + rtol * ref.abs()).all()) and (d.norm() / ref.norm()).item() <= l2
    print(f"  {name:8s} {str(tuple(x.shape)):16s} {str(x.dtype):15s} {'OK ' if ok else 'FAIL'} max_abs={worst:.1e}", flush=True)
    return ok

allok = True
cases = [(64, 1000, torch.float32), (8, 5000, torch.float32), (1, 1, torch.float32), (3, 7, torch.bfloat16),
         (4096, 1000, torch.bfloat16), (1024, 1001, torch.float16), (4096, 4096, torch.float32),
         (512, 8192, torch.bfloat16), (512, 8193, torch.float32), (256, 32000, torch.bfloat16),
         (4096, 128256, torch.bfloat16), (64, 128257, torch.float32), (128, 128256, torch.float16),
         (65536, 1000, torch.float32)]
for r, c, dt in cases:
    x = mk(r, c, dt)
    for n, f in sols.items():
        allok &= check(n, f, x)
x = mk(2000, 64, torch.float32).t()                      # non-contiguous
for n, f in sols.items(): allok &= check(n + "/nc", f, x)
x = mk(1, 256 * 4096 + 1, torch.bfloat16).view(-1)[1:].view(256, 4096)  # misaligned pointer
for n, f in sols.items(): allok &= check(n + "/mis", f, x)
x = mk(17000, 128256, torch.bfloat16)                   # > 2**31 elements: int64 offsets
for n in ("triton", "cuda"): allok &= check(n + "/big", sols[n], x)
del x; torch.cuda.empty_cache()
xb = mk(64, 1000, torch.float32); yb = broken.solve(xb)
print("broken: shape/dtype ok", yb.shape == xb.shape and yb.dtype == xb.dtype,
      "values close?", torch.allclose(yb, torch.softmax(xb, -1), atol=1e-4, rtol=1e-4))
print("ALL OK" if allok else "SOME FAILED", flush=True)

print("timings (ms, do_bench median) and effective GB/s (2*rows*cols*bytes):")
for r, c, dt in [(4096, 128256, torch.bfloat16), (4096, 128256, torch.float32), (65536, 1000, torch.float32),
                 (16384, 4096, torch.bfloat16), (8192, 8192, torch.bfloat16), (1024, 32768, torch.bfloat16)]:
    x = mk(r, c, dt); nb = 2 * x.numel() * x.element_size()
    row = [f"{str((r, c)):14s} {str(dt)[6:]:9s}"]
    for n, f in [("torch", lambda x: torch.softmax(x, -1)), ("pytorch", pt.solve), ("triton", tri.solve), ("cuda", cu.solve)]:
        ms = triton.testing.do_bench(lambda: f(x), warmup=25, rep=100, return_mode="median")
        row.append(f"{n} {ms:7.3f}ms {nb/ms/1e6:6.0f}GB/s")
    print(" | ".join(row), flush=True)
    del x; torch.cuda.empty_cache()
