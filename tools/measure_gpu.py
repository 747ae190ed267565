"""Measure real decode-step and prefill times of a Llama-shaped model on a GPU, for data/.

Not part of the book's tests (no GPU is needed to read the book); run it where a GPU is
available:

    python3 tools/measure_gpu.py --out data/device-measurements.csv [--model Llama-3.1-8B]

What it measures, each with CUDA events around graph replays (so kernel-launch
overhead is excluded unless the metric says "eager"):

* device: total memory (torch.cuda.mem_get_info), device-to-device copy bandwidth,
  and an 8192^3 bf16 matmul rate, as achievable ceilings;
* decode: one decode step of a random-weight transformer with the model's exact
  shapes (bf16 weights and KV cache, GQA attention via scaled_dot_product_attention)
  for several batch sizes and context lengths, captured in a CUDA graph;
  also the same step run eagerly (Python + kernel launches), to show the overhead;
* prefill: one forward pass over a prompt (causal attention), batch 1.

Simplifications, stated in every row's notes: no rotary embedding (elementwise,
<1 % of a step), no sampling, the LM head included, random weights (timing does
not depend on values for dense bf16 kernels).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def load_shape(model: str) -> dict:
    folder = ROOT / "lib" / "servingmath" / "data" / "models"
    for path in folder.glob("*.json"):
        config = json.loads(path.read_text())
        if config.get("servingmath", {}).get("name") == model:
            return config
    raise SystemExit(f"model {model!r} not found in {folder}")


class TinyLlama:
    """The matmuls and attention of a Llama-style decoder, with preallocated KV caches."""

    def __init__(self, cfg: dict, cache_tokens: int, device, dtype):
        d, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.h, self.k = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.dh = d // self.h
        self.layers = cfg["num_hidden_layers"]
        v = cfg["vocab_size"]
        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape):
            return (torch.randn(*shape, device=device, dtype=dtype, generator=g) * 0.02)

        self.embed = w(v, d)
        self.lm_head = w(d, v)
        self.blocks = []
        for _ in range(self.layers):
            self.blocks.append({
                "norm1": torch.ones(d, device=device, dtype=dtype),
                "wqkv": w(d, (self.h + 2 * self.k) * self.dh),
                "wo": w(self.h * self.dh, d),
                "norm2": torch.ones(d, device=device, dtype=dtype),
                "w13": w(d, 2 * f),
                "w2": w(f, d),
                # flat buffers, viewed as [batch, K, capacity // batch, d_h] by each call
                "kcache": torch.zeros(cache_tokens * self.k * self.dh, device=device, dtype=dtype),
                "vcache": torch.zeros(cache_tokens * self.k * self.dh, device=device, dtype=dtype),
            })
        self.d, self.f = d, f
        self.weight_bytes = sum(t.numel() * t.element_size() for b in self.blocks
                                for n, t in b.items() if n not in ("kcache", "vcache"))
        self.weight_bytes += self.embed.numel() * 2 + self.lm_head.numel() * 2

    @staticmethod
    def rms(x, weight):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * weight

    def forward(self, tokens, context: int):
        """tokens: [B, T] ids; attends to `context` cached positions plus the T new ones (causal)."""
        b, t = tokens.shape
        per_seq = self.blocks[0]["kcache"].numel() // (b * self.k * self.dh)
        if context + t > per_seq:
            raise ValueError(f"cache too small for batch {b} x {context + t} tokens")
        x = self.embed[tokens]
        for blk in self.blocks:
            y = self.rms(x, blk["norm1"])
            qkv = y @ blk["wqkv"]
            q, k, v = qkv.split([self.h * self.dh, self.k * self.dh, self.k * self.dh], dim=-1)
            q = q.view(b, t, self.h, self.dh).transpose(1, 2)
            k = k.view(b, t, self.k, self.dh).transpose(1, 2)
            v = v.view(b, t, self.k, self.dh).transpose(1, 2)
            kc = blk["kcache"][:b * self.k * per_seq * self.dh].view(b, self.k, per_seq, self.dh)
            vc = blk["vcache"][:b * self.k * per_seq * self.dh].view(b, self.k, per_seq, self.dh)
            kc[:, :, context:context + t] = k
            vc[:, :, context:context + t] = v
            keys, values = kc[:, :, :context + t], vc[:, :, :context + t]
            if t == 1:
                a = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
            else:
                a = F.scaled_dot_product_attention(q, keys, values, is_causal=(context == 0), enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(b, t, self.h * self.dh) @ blk["wo"]
            y = self.rms(x, blk["norm2"])
            gate, up = (y @ blk["w13"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ blk["w2"]
        return self.rms(x[:, -1], self.blocks[-1]["norm2"]) @ self.lm_head


def time_graph(fn, iters: int) -> float:
    """Median seconds of `fn` replayed from a CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del graph
    return sorted(times)[len(times) // 2]


def time_eager(fn, iters: int) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="Llama-3.1-8B")
    parser.add_argument("--decode", default="512:1,8,32,64,128,256;4096:1,8,32,64",
                        help="context:batch,batch;context:... (each must fit in memory)")
    parser.add_argument("--prompts", default="128,512,2048,8192")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--no-device-ceilings", action="store_true", help="skip copy/read/matmul ceilings")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU, eager only (smoke test)")
    args = parser.parse_args(argv)

    global time_graph
    if args.cpu:
        device, name, sms, total = torch.device("cpu"), "cpu", 0, 0
        time_graph = lambda fn, iters: time_eager(fn, iters)  # noqa: E731
        torch.cuda.synchronize = lambda: None
    else:
        device = torch.device("cuda")
        props = torch.cuda.get_device_properties(0)
        name, sms = props.name, props.multi_processor_count
        free, total = torch.cuda.mem_get_info()
    dtype = torch.bfloat16
    today = datetime.date.today().isoformat()
    env = f"torch {torch.__version__}; {name}; {sms} SMs; measured {today}"
    rows = []

    def add(model, batch, context, prompt, metric, value, units, notes):
        rows.append(dict(model=model, hardware=name, batch_size=batch, context_len=context,
                         prompt_len=prompt, metric=metric, value=f"{value:.6g}", units=units,
                         method="tools/measure_gpu.py", environment=env, notes=notes))
        print(f"{metric:28s} B={batch!s:>4s} S={context!s:>5s} Lp={prompt!s:>5s} {value:.6g} {units}", flush=True)

    add("", "", "", "", "memory_total_bytes", total, "B", "torch.cuda.mem_get_info()[1]")
    # copy bandwidth: read + write of a 4 GiB buffer
    n = (1 << 31) if not args.tiny else (1 << 20)
    src = torch.empty(n, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    t = time_graph(lambda: dst.copy_(src), args.iters)
    add("", "", "", "", "copy_bandwidth", 2 * src.numel() * 2 / t, "B/s", "device-to-device copy, bytes read + written, 4 GiB buffer")
    t = time_graph(lambda: src.sum(dtype=torch.float32), args.iters)
    add("", "", "", "", "read_bandwidth", src.numel() * 2 / t, "B/s", "sum of a 4 GiB bf16 buffer (bytes read)")
    del src, dst
    m = 8192 if not args.tiny else 256
    a = torch.randn(m, m, dtype=dtype, device=device)
    b = torch.randn(m, m, dtype=dtype, device=device)
    t = time_graph(lambda: a @ b, args.iters)
    add("", "", "", "", "matmul_bf16_flops", 2 * m**3 / t, "FLOP/s", f"{m}^3 bf16 matmul on random normal data")
    del a, b

    cfg = load_shape(args.model)
    if args.tiny:
        cfg = dict(cfg, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    plan = [(int(c), [int(b) for b in bs.split(",")])
            for c, bs in (part.split(":") for part in args.decode.split(";"))]
    prompts = [int(x) for x in args.prompts.split(",")]
    cache_tokens = max([max(bs) * (c + 1) for c, bs in plan] + [max(prompts)])
    model = TinyLlama(cfg, cache_tokens, device, dtype)
    add(args.model, "", "", "", "weight_bytes_allocated", model.weight_bytes, "B", "bf16 weights of the random-weight replica")
    note = ("random-weight replica with the model's exact shapes, bf16 weights and KV cache, SDPA attention "
            "(GQA), no RoPE, no sampling; CUDA-graph replay, median of runs")
    with torch.inference_mode():
        for s, batches in plan:
            for bsz in batches:
                tokens = torch.zeros(bsz, 1, dtype=torch.long, device=device)
                t = time_graph(lambda: model.forward(tokens, s), args.iters)
                add(args.model, bsz, s, "", "decode_step_s", t, "s", note)
            tokens = torch.zeros(1, 1, dtype=torch.long, device=device)
            t = time_eager(lambda: model.forward(tokens, s), args.iters)
            add(args.model, 1, s, "", "decode_step_eager_s", t, "s",
                note.replace("CUDA-graph replay", "eager PyTorch (kernel launches from Python)"))
        for lp in prompts:
            tokens = torch.zeros(1, lp, dtype=torch.long, device=device)
            t = time_graph(lambda: model.forward(tokens, 0), max(5, args.iters // 2))
            add(args.model, 1, 0, lp, "prefill_s", t, "s", note.replace("median of runs", "median of runs; causal flash attention"))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
