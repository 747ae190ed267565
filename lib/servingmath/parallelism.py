"""Tensor parallelism: the cost of the all-reduces that split layers need.

With tensor parallelism of degree N each layer ends its attention block and
its FFN block with an all-reduce of the activations (batch x tokens x D
elements). A ring all-reduce sends 2 (N - 1) / N of the message over each
GPU's link and takes 2 (N - 1) hops, which gives the alpha-beta cost

    t = 2 (N - 1) alpha + 2 (N - 1) / N x bytes / beta

with alpha the latency per hop and beta the one-way link bandwidth. The
default alpha = 0 is the physical bound; measured NCCL all-reduces of small
messages on NVLink take several microseconds (see the tensor-parallelism chapter).

Examples
--------
>>> allreduce_time(1e9, n_gpus=2, link_bandwidth=1e9)
1.0
>>> allreduce_time(1e9, n_gpus=1, link_bandwidth=1e9)
0.0
"""

from __future__ import annotations

import numpy as np

from ._validation import check_integer, check_nonnegative, check_positive, scalar_or_array
from .datatypes import bytes_per_element
from .hardware import get_accelerator
from .models import get_model

__all__ = ["allreduce_time", "tensor_parallel_communication_time"]


def allreduce_time(message_bytes, n_gpus, link_bandwidth, latency=0.0):
    """Ring all-reduce of ``message_bytes`` over ``n_gpus``: 2(N-1)alpha + 2(N-1)/N bytes/beta (s)."""
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    bw = check_positive("link_bandwidth", link_bandwidth)
    a = check_nonnegative("latency", latency)
    result = 2 * (n - 1) * a + 2 * (n - 1) / n * m / bw
    return scalar_or_array(result, message_bytes, n_gpus, link_bandwidth, latency)


def tensor_parallel_communication_time(model, accelerator, tokens, tensor_parallel,
                                       activation_dtype: str = "bf16", latency=0.0):
    """Seconds per forward step spent in all-reduces: 2 per layer of ``tokens`` x D activations.

    ``tokens`` is the number of tokens in the step (the batch size in decode,
    batch x prompt length in prefill). Zero when ``tensor_parallel`` is 1.
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    t = check_nonnegative("tokens", tokens)
    message = t * model.hidden_size * bytes_per_element(activation_dtype)
    if np.all(n == 1):
        return scalar_or_array(np.zeros(np.broadcast(t, n).shape), tokens, tensor_parallel)
    if acc.interconnect_bandwidth is None:
        raise ValueError(f"accelerator {acc.name} has no interconnect bandwidth; "
                         "tensor_parallel > 1 needs one")
    per_layer = 2 * allreduce_time(message, n, acc.interconnect_bandwidth, latency)
    return scalar_or_array(model.n_layers * np.asarray(per_layer), tokens, tensor_parallel, latency)
