"""Decode-step GEMM benchmark: the weight matmuls of one Llama-3.1-70B TP=8 shard, on one GPU.

Measures, for batch sizes M, the time of the 80 layers x 4 weight matmuls (QKV, O, gate+up, down)
of one tensor-parallel rank (TP = 8), and reports achieved bandwidth and FLOP/s as fractions of
the spec peaks (H200: 4.8 TB/s, 989.4 TFLOP/s dense bf16). No attention, no communication.
"""
import json, os, sys, time

out = os.environ.get("OUT", ".")
result = {"python": sys.version}
try:
    import torch
except Exception as exc:  # noqa: BLE001
    result["error"] = f"no torch: {exc!r}"
    json.dump(result, open(os.path.join(out, "bench.json"), "w"), indent=1)
    print(json.dumps(result))
    sys.exit(0)

result["torch"] = torch.__version__
result["device"] = torch.cuda.get_device_name(0)
dev = "cuda"
L, D, F, H, K, dh, N = 80, 8192, 28672, 64, 8, 128, 8
shapes = [(D, (H + 2 * K) * dh // N), (H * dh // N, D), (D, 2 * F // N), (F // N, D)]
weights = []
for _ in range(L):
    for k, n in shapes:
        w = torch.empty(k, n, device=dev, dtype=torch.bfloat16)
        w.normal_(0, 0.02)
        weights.append(w)
wbytes = sum(w.numel() * 2 for w in weights)
flops_per_row = sum(2 * w.numel() for w in weights)
result["weight_bytes_per_gpu"] = wbytes
peak_bw, peak_flops = 4.8e12, 989.4e12
if "H100" in result["device"]:
    peak_bw = 3.35e12
result["peak_bw"] = peak_bw


def step(xs):
    for i, w in enumerate(weights):
        x = xs[i % 4]
        torch.matmul(x, w)


rows = []
for m in [1, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024]:
    xs = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for k, _ in shapes]
    outs = None
    for _ in range(3):
        step(xs)
    torch.cuda.synchronize()
    mode = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step(xs)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            step(xs)
        run = g.replay
    except Exception as exc:  # noqa: BLE001
        mode = f"eager ({exc!r})"
        run = lambda: step(xs)  # noqa: E731
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    reps = 20
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record(); run(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    t = sorted(times)[len(times) // 2]
    row = {"M": m, "t_s": t, "mode": mode, "bw_frac": wbytes / t / peak_bw,
           "flop_frac": flops_per_row * m / t / peak_flops}
    rows.append(row)
    print(json.dumps(row), flush=True)
result["rows"] = rows
json.dump(result, open(os.path.join(out, "bench.json"), "w"), indent=1)
