"""Pipeline parallelism in the simulator: P stages, micro-batches in flight, the bubble.

The model
---------
A server with ``pipeline_parallel=P`` splits the model's layers evenly over P
stages (each on its own ``tensor_parallel`` GPUs). One engine iteration, whose
whole-model time is t (the step model's time of the iteration, per-step overhead
o included), becomes P stage times:

    p_s = (t - o) / P + x(T)   for the stages s = 1 .. P-1, which send their output on,
    p_P = (t - o) / P          for the last stage (it sends only sampled token ids),

with x(T) = latency + T x D x 2 bytes / link bandwidth, the activations of the
iteration's T tokens (hidden size D, bf16) over the stage-to-stage link. The
per-iteration overhead o (scheduling, sampling) is paid once, on the host, before
the first stage (``Server(pipeline_overhead="host")``, the default), or on every
stage, each stage time growing by o (``pipeline_overhead="stage"``: every rank runs
its own executor loop and prepares every micro-batch, as TensorRT-LLM's PyExecutor
and vLLM's workers do; with the pipe full a round of P iterations then lasts
t + (P - 1) o + P x, the memory wall's price in :mod:`servingmath.validation`).
Stages are FIFO servers in a line (a flow shop): an iteration
enters stage s when it has left stage s-1 and stage s is free, so

    end_s = max(end_{s-1}, free_s) + p_s,   free_s = end_s.

As in vLLM v0, the server runs P *virtual engines*, each with its own scheduler
and its own batch (a micro-batch), 1/P of the KV blocks and ``max_batch_size``
sequences; a new request goes to the virtual engine with the fewest unfinished
requests. A virtual engine starts its next iteration when its previous one has
left the last stage (it needs the sampled tokens), so at most P micro-batches
are in flight. Runs of decode steps are simulated one step at a time.

What follows from it (tested in ``tests/test_simulate_features.py``):

* P = 1 is the single-stage server exactly (no pipeline object is built).
* A lone micro-batch sees the whole pipe: its iteration takes
  o + sum_s p_s = t + (P - 1) x(T). At low load pipelining buys no latency.
* m <= P micro-batches released together finish after o + (m + P - 1) p at
  equal stage times p: the stages are idle a fraction (P - 1) / (m + P - 1) of
  that time, GPipe's bubble (Huang et al. 2019, sec. 2.2; Narayanan et al. 2021,
  sec. 2.2.1, write the same bubble as (P - 1) / m of the ideal time).
* With P busy virtual engines the pipeline is full: one iteration leaves every
  max_s p_s, so throughput is set by the slowest stage, about P times one
  stage's rate.

Not modelled: uneven layer splits (and the embedding and LM head living on the
first and last stage), contention between the P-1 transfers for one link, and
the activation memory of micro-batches in flight.

References
----------
* Y. Huang et al., "GPipe: Efficient Training of Giant Neural Networks using
  Pipeline Parallelism", NeurIPS 2019 (arXiv:1811.06965): bubble (P-1)/(m+P-1).
* D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", SC 2021 (arXiv:2104.04473), sec. 2.2.
* A. Agrawal et al., "Vidur: A Large-Scale Simulation Framework for LLM
  Inference", MLSys 2024: replica stages with one scheduler per stage.
* vLLM v0: ``Scheduler.__init__`` gives each of the P virtual engines
  ``num_gpu_blocks // pipeline_parallel_size`` blocks (``vllm/core/scheduler.py``,
  commit 006a839fcbc3bd9584eb414a355a5b9fedd5372f); ``LLMEngine.add_request``
  sends a request to the scheduler with the fewest unfinished sequence groups.
"""

from __future__ import annotations

__all__ = ["Pipeline"]


class Pipeline:
    """The stages of one pipeline-parallel server, shared by its virtual engines.

    Derived in the chapter "A fleet: routing, pooling, prefix caches and autoscaling" (notebooks/15_fleet.ipynb).
    """

    __slots__ = ("stages", "overhead", "latency", "per_token", "free", "busy", "every_stage")

    def __init__(self, stages: int, overhead: float, latency: float, per_token: float, *, every_stage=False):
        self.stages = int(stages)
        self.every_stage = bool(every_stage)
        self.overhead = float(overhead)
        self.latency = float(latency)
        self.per_token = float(per_token)
        self.free = [0.0] * self.stages     # when each stage finishes its last accepted iteration
        self.busy = [0.0] * self.stages     # seconds each stage has worked (for utilisation)

    def stage_times(self, seconds: float, tokens: int) -> list[float]:
        """The P stage times of an iteration of whole-model time ``seconds`` over ``tokens`` tokens."""
        p = self.stages
        compute = max(seconds - self.overhead, 0.0) / p + (self.overhead if self.every_stage else 0.0)
        send = self.latency + self.per_token * tokens
        return [compute + send] * (p - 1) + [compute]

    def submit(self, t: float, seconds: float, tokens: int) -> float:
        """An iteration is ready at ``t``: pass it through the stages (FIFO) and return when it leaves."""
        end = t + (0.0 if self.every_stage else self.overhead)
        free, busy = self.free, self.busy
        for s, ps in enumerate(self.stage_times(seconds, tokens)):
            if free[s] > end:
                end = free[s]
            end += ps
            free[s] = end
            busy[s] += ps
        return end
