"""Benchmark (not a test): how many requests per second the serving simulator simulates, on one core.

    .venv/bin/python tools/bench_simulator.py            # the reference case
    .venv/bin/python tools/bench_simulator.py --requests 200000 --rate 40 --repeat 5

The reference case: Llama-3.1-8B on one H100, 512-token prompts, 128-token
outputs, continuous batching (prefill first, batch cap 256), Poisson
arrivals at a moderate load (30 requests/s: about 25 sequences in the batch,
well below saturation). Prints the best of ``--repeat`` runs of ``simulate``
(building the result included), as wall time and as the CPU time of this
single-threaded process (the honest figure when other jobs share the
cores), and checks the result is sane. The target is >= 50,000 simulated
requests per second on one core.
"""

from __future__ import annotations

import argparse
import sys
import time

from servingmath import simulate as sim
from servingmath.workloads import Poisson, Workload


def build(n_requests, rate, policy):
    policies = {
        "continuous": sim.ContinuousBatching(max_batch_size=256),
        "chunked": sim.ChunkedPrefill(token_budget=512, max_batch_size=256),
        "static": sim.StaticBatching(batch_size=32, timeout=0.05),
    }
    return sim.SimulationConfig(
        server=sim.Server("Llama-3.1-8B", "H100"),
        workload=Workload.fixed(n_requests, prompt_len=512, output_len=128),
        arrivals=Poisson(rate=rate),
        policy=policies[policy],
    )


def python_speed() -> float:
    """CPU seconds for 10 million Python additions: compare machines with it."""
    start = time.process_time()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.process_time() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=30.0, help="Poisson requests/s")
    parser.add_argument("--policy", choices=["continuous", "chunked", "static"], default="continuous")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-calibration", action="store_true",
                        help="skip timing 1e7 Python additions (a yardstick to compare machines)")
    args = parser.parse_args(argv)

    config = build(args.requests, args.rate, args.policy)
    sim.simulate(build(1000, args.rate, args.policy), seed=args.seed)  # warm caches (step tables)
    best, best_cpu = float("inf"), float("inf")
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = sim.simulate(config, seed=args.seed)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    m = result.metrics(itl=False)
    batch = result.timeseries()["decoding"]
    print(f"policy {args.policy}, {args.requests} requests at {args.rate:g} requests/s "
          f"(Llama-3.1-8B, H100, 512 -> 128 tokens)")
    print(f"  simulated time {m.duration:.0f} s, mean decode batch {batch.mean():.1f}, "
          f"TTFT P50 {m.ttft.p50 * 1e3:.1f} ms, TPOT P50 {m.tpot.p50 * 1e3:.2f} ms")
    print(f"  best of {args.repeat}: {best:.3f} s wall -> {args.requests / best:,.0f} simulated requests/s")
    print(f"  best of {args.repeat}: {best_cpu:.3f} s CPU  -> {args.requests / best_cpu:,.0f} simulated requests/s "
          "(CPU time of this one process: the figure to quote on a shared machine)")
    if not args.no_calibration:
        print(f"  calibration: 1e7 Python additions take {python_speed():.2f} s of CPU on this machine")
    if m.n_requests != args.requests or not m.output_throughput > 0:
        print("  result is not sane", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
