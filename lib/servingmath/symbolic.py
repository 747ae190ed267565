"""The book's sympy symbols, and the check that a derived formula equals the library.

Every chapter derives its formulas with these symbols and ends the derivation
with :func:`assert_matches`: the expression, lambdified, must equal the
library function on a grid of points. The notation table in chapter 00 maps
each symbol to the library's parameter name (:data:`NOTATION`).

Examples
--------
>>> import numpy as np
>>> expr = 2 * L * K * d_h * b_kv
>>> n = assert_matches(expr, {L: 32, K: 32, d_h: 128, b_kv: np.array([1, 2])}, [262144, 524288])
>>> n
2
"""

from __future__ import annotations

import numpy as np
import sympy as sp

__all__ = ["NOTATION", "assert_matches", "numpy_function", "symbol_table"]

# Symbols: positive reals unless counts.
B = sp.Symbol("B", positive=True)                 # batch size (sequences decoding together)
S = sp.Symbol("S", positive=True)                 # context length (tokens in the KV cache per sequence)
L_p = sp.Symbol("L_p", positive=True)             # prompt length (tokens)
L_o = sp.Symbol("L_o", positive=True)             # output length (tokens)
L = sp.Symbol("L", positive=True, integer=True)   # layers
D = sp.Symbol("D", positive=True, integer=True)   # hidden size
H = sp.Symbol("H", positive=True, integer=True)   # query heads
K = sp.Symbol("K", positive=True, integer=True)   # KV heads
d_h = sp.Symbol("d_h", positive=True, integer=True)  # head size
F_ffn = sp.Symbol("F_ffn", positive=True, integer=True)  # FFN size
V = sp.Symbol("V", positive=True, integer=True)   # vocabulary
P = sp.Symbol("P", positive=True)                 # parameters
b_w = sp.Symbol("b_w", positive=True)             # bytes per weight
b_kv = sp.Symbol("b_kv", positive=True)           # bytes per KV element
b_a = sp.Symbol("b_a", positive=True)             # bytes per activation element
F = sp.Symbol("F", positive=True)                 # peak FLOP/s (dense)
W = sp.Symbol("W", positive=True)                 # memory bandwidth, bytes/s
M = sp.Symbol("M", positive=True)                 # memory capacity, bytes
N = sp.Symbol("N", positive=True, integer=True)   # tensor-parallel degree (GPUs)
eta_f = sp.Symbol("eta_F", positive=True)         # MFU
eta_w = sp.Symbol("eta_W", positive=True)         # MBU
lam = sp.Symbol("lambda", positive=True)          # arrival rate, requests/s
rho = sp.Symbol("rho", positive=True)             # utilisation
tau = sp.Symbol("tau", positive=True)             # TPOT SLO, seconds
alpha = sp.Symbol("alpha", positive=True)         # latency per all-reduce hop, seconds
beta = sp.Symbol("beta", positive=True)           # one-way link bandwidth, bytes/s
P_body = sp.Symbol("P_body", positive=True)       # weights each token multiplies, LM head excluded
u = sp.Symbol("u", positive=True)                 # fraction of GPU memory the server may use
R = sp.Symbol("R", positive=True)                 # bytes reserved (activations, CUDA graphs, ...)

# symbol -> (library parameter or function, meaning, SI unit)
NOTATION = {
    B: ("batch_size", "sequences decoded together in one step", "1"),
    S: ("context_len", "tokens already in a sequence's KV cache", "tokens"),
    L_p: ("prompt_len", "prompt (input) length", "tokens"),
    L_o: ("output_len", "generated (output) length", "tokens"),
    L: ("ModelConfig.n_layers", "transformer layers", "1"),
    D: ("ModelConfig.hidden_size", "model width", "1"),
    H: ("ModelConfig.n_heads", "query heads", "1"),
    K: ("ModelConfig.n_kv_heads", "key/value heads (H: MHA, 1: MQA, else GQA)", "1"),
    d_h: ("ModelConfig.head_dim", "size of one attention head", "1"),
    F_ffn: ("ModelConfig.ffn_size", "feed-forward intermediate size", "1"),
    V: ("ModelConfig.vocab_size", "vocabulary size", "1"),
    P: ("models.parameter_count", "parameters (active ones for MoE)", "1"),
    b_w: ("weight_dtype", "bytes per weight (bf16: 2, fp8: 1, int4: 0.5)", "B"),
    b_kv: ("kv_dtype", "bytes per KV-cache element", "B"),
    b_a: ("compute_dtype", "bytes per activation element", "B"),
    F: ("Accelerator.peak_flops(dtype)", "dense peak compute", "FLOP/s"),
    W: ("Accelerator.memory_bandwidth", "peak memory bandwidth", "B/s"),
    M: ("Accelerator.memory_bytes", "memory capacity", "B"),
    N: ("tensor_parallel", "GPUs one model is split across", "1"),
    eta_f: ("mfu", "model FLOP utilisation: achieved / peak FLOP/s", "1"),
    eta_w: ("mbu", "memory-bandwidth utilisation: achieved / peak bandwidth", "1"),
    lam: ("arrival_rate", "request arrival rate", "req/s"),
    rho: ("utilisation", "fraction of time the server is busy", "1"),
    tau: ("tpot_slo", "target time per output token", "s"),
    alpha: ("allreduce_latency", "latency per all-reduce hop", "s"),
    beta: ("Accelerator.interconnect_bandwidth", "one-way GPU-to-GPU link bandwidth", "B/s"),
    P_body: ("prefill.body_parameter_count", "weights each token multiplies (LM head excluded)", "1"),
    u: ("gpu_memory_utilization", "fraction of GPU memory the server may use (vLLM: 0.9)", "1"),
    R: ("reserve_bytes", "memory kept back for activations, CUDA graphs, ...", "B"),
}


def symbol_table():
    """Rows (symbol, library name, meaning, unit) for the notation table."""
    return [(str(sym), *info) for sym, info in NOTATION.items()]


def numpy_function(symbols, expression):
    """``sympy.lambdify(symbols, expression)`` evaluated with numpy: broadcasts over arrays.

    It hands sympy the numpy module itself rather than the string ``"numpy"``: the
    string makes sympy run ``from numpy import *`` once per process, which imports
    numpy.f2py and numpy.testing and costs 0.1-0.2 s of a chapter's run.

    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> numpy_function([x], sp.Max(x, 1) + sp.sqrt(x))(np.array([0.25, 4.0])).tolist()
    [1.5, 6.0]
    """
    return sp.lambdify(symbols, expression, modules=[np])


def assert_matches(expression, values: dict, expected, rtol: float = 1e-9) -> int:
    """Assert that ``expression`` evaluated at ``values`` equals ``expected``.

    Parameters
    ----------
    expression : sympy expression
    values : dict
        Every free symbol of the expression -> a number or an array (arrays broadcast).
    expected : array_like
        What the library computes at the same points.
    rtol : float
        Relative tolerance.

    Returns
    -------
    int
        The number of points compared (so a notebook can print it).

    Raises
    ------
    AssertionError
        Naming the worst point, if any point differs.
    ValueError
        If a free symbol of the expression has no value.
    """
    expression = sp.sympify(expression)
    missing = expression.free_symbols - set(values)
    if missing:
        raise ValueError(f"values lacks {', '.join(sorted(map(str, missing)))}")
    symbols = list(values)
    function = numpy_function(symbols, expression)
    args = [np.asarray(values[s], dtype=float) for s in symbols]
    got = np.asarray(function(*args), dtype=float)
    want = np.asarray(expected, dtype=float)
    got, want = np.broadcast_arrays(got, want)
    error = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    if not np.all(error <= rtol):
        worst = np.unravel_index(np.argmax(error), error.shape)
        raise AssertionError(
            f"formula and library differ: formula gives {got[worst]!r}, library {want[worst]!r} "
            f"(relative error {error[worst]:.3g} > {rtol:g}) at index {worst}"
        )
    return int(got.size)
