"""Benchmark (not a test): how many requests per second the serving simulator simulates, on one core.

    .venv/bin/python tools/bench_simulator.py            # the reference case: one replica
    .venv/bin/python tools/bench_simulator.py --requests 200000 --rate 40 --repeat 5
    .venv/bin/python tools/bench_simulator.py --replicas 16          # a 16-replica fleet
    .venv/bin/python tools/bench_simulator.py --replicas 1 16 --against ../other-checkout
                                                          # both cases, this tree beside another one
    .venv/bin/python tools/bench_simulator.py --replicas 16 --router random --workers 4
                                                          # a decoupled fleet in 4 processes (wall time)

The reference case: Llama-3.1-8B on one H100, 512-token prompts, 128-token
outputs, continuous batching (prefill first, batch cap 256), Poisson
arrivals at a moderate load (30 requests/s per replica: about 25 sequences in
the batch, well below saturation). With ``--replicas N`` (N > 1) the same
replica N times behind a least-loaded router (outstanding tokens) fed
N x 30 requests/s; ``--router`` picks another router. Prints the best of
``--repeat`` runs of ``simulate`` (building the result included), as wall
time and as the CPU time of this single-threaded process (the honest figure
when other jobs share the cores), and checks the result is sane; for a fleet,
also the CPU time a whole day of its traffic would take at that speed. The
target is >= 50,000 simulated requests per second on one core. ``--workers N``
passes ``workers=N`` to ``simulate`` (a fleet whose replicas never interact,
e.g. ``--router random``, is then simulated in N processes: compare wall times;
the CPU time printed is this process's only).

``--against PATH`` runs every case in fresh processes, alternating this tree
and the checkout at PATH (its ``lib/`` on ``PYTHONPATH``), so that both see
the same machine load; a library without fleets there (before
``FleetConfig``) runs the N-replica case as N independent one-replica
simulations at rate/N each (random routing splits a Poisson stream into
independent Poisson streams: the same traffic, without a router).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from servingmath import simulate as sim
from servingmath.workloads import Poisson, Workload

RATE_PER_REPLICA = 30.0


def _policy(name):
    return {
        "continuous": sim.ContinuousBatching(max_batch_size=256),
        "chunked": sim.ChunkedPrefill(token_budget=512, max_batch_size=256),
        "static": sim.StaticBatching(batch_size=32, timeout=0.05),
    }[name]


def build(n_requests, rate, policy, replicas=1, router="least-loaded"):
    """The benchmark's configuration: one replica (a SimulationConfig) or a fleet (a FleetConfig)."""
    server = sim.Server("Llama-3.1-8B", "H100")
    workload = Workload.fixed(n_requests, prompt_len=512, output_len=128)
    if replicas == 1:
        return sim.SimulationConfig(server=server, workload=workload, arrivals=Poisson(rate=rate),
                                    policy=_policy(policy))
    routers = {"least-loaded": sim.LeastLoaded(), "random": sim.Random(), "round-robin": sim.RoundRobin(),
               "least-requests": sim.LeastLoaded(measure="requests")}
    return sim.FleetConfig(replicas=[sim.Replica(server, _policy(policy))] * replicas, router=routers[router],
                           workload=workload, arrivals=Poisson(rate=rate))


def has_fleets() -> bool:
    return hasattr(sim, "FleetConfig")


def run_case(n_requests, rate, policy, replicas, router, seed, workers=1):
    """Simulate one case; return (wall s, CPU s, requests, duration, mean TTFT P50)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    if replicas == 1 or has_fleets():
        options = {"workers": workers} if workers > 1 else {}
        result = sim.simulate(build(n_requests, rate, policy, replicas, router), seed=seed, **options)
        results = [result]
    else:   # a library without fleets: N independent replicas at rate / N (random routing)
        per = -(-n_requests // replicas)
        results = [sim.simulate(build(per, rate / replicas, policy), seed=seed * 1000 + k) for k in range(replicas)]
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    done = sum(len(r.records) for r in results)
    m = results[0].metrics(itl=False)
    return wall, cpu, done, m.duration, m.ttft.p50, m.tpot.p50, m.n_requests


def python_speed() -> float:
    """CPU seconds for 10 million Python additions: compare machines with it."""
    start = time.process_time()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.process_time() - start


def _worker(args) -> int:
    """Run one case once (after a warm-up) and print a JSON line: used by --against."""
    replicas = args.replicas[0]
    sim.simulate(build(1000, RATE_PER_REPLICA, args.policy), seed=args.seed)          # warm the step tables
    wall, cpu, done, *_ = run_case(args.requests, args.rate * replicas, args.policy, replicas, args.router,
                                   args.seed)
    print(json.dumps({"wall": wall, "cpu": cpu, "requests": done, "fleets": has_fleets()}))
    return 0


def _compare(args) -> int:
    here = Path(__file__).resolve().parents[1]
    there = Path(args.against).resolve()
    if not (there / "lib" / "servingmath").is_dir():
        print(f"--against: no lib/servingmath under {there}", file=sys.stderr)
        return 2
    trees = [("this tree", here), (f"{there.name}", there)]
    best = {}
    for _ in range(args.repeat):
        for replicas in args.replicas:
            for label, tree in trees:
                env = dict(os.environ, PYTHONPATH=str(tree / "lib"))
                cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--requests", str(args.requests),
                       "--rate", str(args.rate), "--policy", args.policy, "--replicas", str(replicas),
                       "--router", args.router, "--seed", str(args.seed)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return 1
                row = json.loads(out.stdout.strip().splitlines()[-1])
                key = (replicas, label)
                if key not in best or row["cpu"] < best[key]["cpu"]:
                    best[key] = row
    print(f"policy {args.policy}, {args.requests} requests, {args.rate:g} requests/s per replica "
          f"(Llama-3.1-8B, H100, 512 -> 128 tokens); best of {args.repeat}, alternating trees")
    for replicas in args.replicas:
        for label, _ in trees:
            row = best[(replicas, label)]
            how = ("one replica" if replicas == 1 else
                   f"{replicas} replicas, {args.router}" if row["fleets"] else
                   f"{replicas} independent replicas (no fleets in this library)")
            speed = row["requests"] / row["cpu"]
            day = f", a day {86400 * args.rate * replicas / speed:,.0f} s" if replicas > 1 else ""
            print(f"  {label:>14s}: {how:<44s} {row['cpu']:7.3f} s CPU -> "
                  f"{speed:>9,.0f} simulated requests per CPU-second{day}")
    return 0


DAY_MODEL, DAY_GPU, DAY_TP = "Llama-3.1-70B", "H100-SXM5-80GB", 8
DAY_SLO = dict(ttft_slo=0.5, tpot_slo=0.05)       # chapter 15's SLO


def simulate_day(args) -> int:
    """A whole day of a 16-replica fleet, simulated (not extrapolated), at the realistic setting.

    Chapter 15's diurnal day (hourly Poisson pieces, peak/trough 4) of the synthetic chat
    workload, served by up to 16 replicas of Llama-3.1-70B on 8 H100s each (chunked prefill,
    budget 512, batch <= 256) behind a least-loaded router, autoscaled every minute to N + 1 of
    one replica's planned rate (capacity.replica_capacity at chapter 15's SLO), a replica ready
    two minutes after it starts. The mean rate is set so that the peak hour needs all 16.
    Prints the CPU time of simulate (and of metrics), the requests, and what the day looked like.
    """
    import resource

    from servingmath import capacity
    from servingmath.settings import REALISTIC
    from servingmath.workloads import PiecewisePoisson, chat_workload

    shape = chat_workload(20_000, seed=1)
    per = capacity.replica_capacity(DAY_MODEL, DAY_GPU, shape.prompt_lens, shape.output_lens, max_batch_size=256,
                                    setting="realistic", tensor_parallel=DAY_TP, **DAY_SLO)["rate"]
    peak_pieces = PiecewisePoisson.diurnal(mean_rate=1.0, peak_to_trough=4.0).rates.max()
    mean = (args.day_replicas - 1) * per / peak_pieces * 0.999        # the peak hour needs N + 1 = all of them
    arrivals = PiecewisePoisson.diurnal(mean_rate=mean, peak_to_trough=4.0)
    n = int(round(mean * 86400))
    workload = chat_workload(n, seed=args.seed)
    server = sim.Server(DAY_MODEL, DAY_GPU, tensor_parallel=DAY_TP, **REALISTIC)
    config = sim.FleetConfig(
        replicas=[sim.Replica(server, sim.ChunkedPrefill(token_budget=512, max_batch_size=256))] * args.day_replicas,
        router=sim.LeastLoaded(), workload=workload, arrivals=arrivals,
        autoscaler=sim.RateScaling(rate_per_replica=per, headroom=1, interval=60.0, warmup=120.0))
    sim.simulate(dataclasses.replace(config, workload=chat_workload(2000, seed=0)), seed=args.seed)   # warm up
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.process_time()
    result = sim.simulate(config, seed=args.seed)
    cpu = time.process_time() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    start = time.process_time()
    m = result.metrics(itl=False)
    cpu_metrics = time.process_time() - start
    timeline = result.replica_timeline()
    cpu_timeline = time.process_time() - start - cpu_metrics
    print(f"a day of a {args.day_replicas}-replica fleet: {DAY_MODEL} on {DAY_TP} x H100 per replica, realistic "
          f"setting, chat workload, mean {mean:.1f} req/s (peak/trough 4), {n:,} requests")
    print(f"  autoscaled N + 1 at {per:.2f} req/s per replica: at most {int(timeline['serving'].max())} serving, "
          f"{timeline['replica_seconds'] / 3600:,.0f} replica-hours")
    print(f"  TTFT P99 {m.ttft.p99 * 1e3:,.0f} ms, TPOT P50 {m.tpot.p50 * 1e3:.1f} ms, "
          f"{result.slo_attainment(**DAY_SLO):.3f} within the SLO")
    print(f"  simulate: {cpu:.1f} s CPU ({user:.1f} s user, {system:.1f} s system: mostly the memory's first "
          f"touch), {n / cpu:,.0f} requests per CPU-second; metrics: {cpu_metrics:.1f} s; "
          f"replica timeline: {cpu_timeline:.1f} s; "
          f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.1f} GB")
    return 0 if len(result.records) == n and m.n_requests == n else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=RATE_PER_REPLICA, help="Poisson requests/s per replica")
    parser.add_argument("--policy", choices=["continuous", "chunked", "static"], default="continuous")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1],
                        help="replicas of the fleet (several values: one case each)")
    parser.add_argument("--router", choices=["least-loaded", "random", "round-robin", "least-requests"],
                        default="least-loaded")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1,
                        help="processes for a fleet whose replicas never interact (simulate's workers=)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--against", metavar="PATH", help="another checkout to measure beside this one")
    parser.add_argument("--day", action="store_true",
                        help="simulate a whole diurnal day of an autoscaled fleet (see simulate_day()); about 11 M requests")
    parser.add_argument("--day-replicas", type=int, default=16)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-calibration", action="store_true",
                        help="skip timing 1e7 Python additions (a yardstick to compare machines)")
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)
    if args.day:
        return simulate_day(args)
    if args.against:
        code = _compare(args)
        if code == 0 and not args.no_calibration:
            print(f"  calibration: 1e7 Python additions take {python_speed():.2f} s of CPU on this machine")
        return code

    sim.simulate(build(1000, RATE_PER_REPLICA, args.policy), seed=args.seed)  # warm caches (step tables)
    status = 0
    for replicas in args.replicas:
        best, best_cpu = float("inf"), float("inf")
        for _ in range(args.repeat):
            wall, cpu, done, duration, ttft, tpot, n = run_case(args.requests, args.rate * replicas, args.policy,
                                                                replicas, args.router, args.seed, args.workers)
            best, best_cpu = min(best, wall), min(best_cpu, cpu)
        what = "one replica" if replicas == 1 else f"{replicas} replicas behind {args.router}"
        print(f"policy {args.policy}, {args.requests} requests at {args.rate * replicas:g} requests/s, {what} "
              f"(Llama-3.1-8B, H100, 512 -> 128 tokens)")
        print(f"  simulated time {duration:.0f} s, TTFT P50 {ttft * 1e3:.1f} ms, TPOT P50 {tpot * 1e3:.2f} ms")
        print(f"  best of {args.repeat}: {best:.3f} s wall -> {done / best:,.0f} simulated requests/s")
        print(f"  best of {args.repeat}: {best_cpu:.3f} s CPU  -> {done / best_cpu:,.0f} simulated requests/s "
              + ("(CPU time of this one process: the figure to quote on a shared machine)" if args.workers == 1
                 else "(CPU time of this process only: its workers' is not counted)"))
        if replicas > 1:
            day = 86400 * args.rate * replicas
            if args.workers > 1:     # the workers' CPU time is not this process's: quote the wall time
                print(f"  a day at {args.rate * replicas:g} requests/s ({day / 1e6:.1f} M requests) would take about "
                      f"{day / (done / best):,.0f} s of wall time with {args.workers} workers")
            else:
                print(f"  a day at {args.rate * replicas:g} requests/s ({day / 1e6:.1f} M requests) would take about "
                      f"{day / (done / best_cpu):,.0f} s of CPU")
        if done != args.requests or not n > 0:
            print("  result is not sane", file=sys.stderr)
            status = 1
    if not args.no_calibration:
        print(f"  calibration: 1e7 Python additions take {python_speed():.2f} s of CPU on this machine")
    return status


if __name__ == "__main__":
    sys.exit(main())
