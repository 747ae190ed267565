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

# Symbols: positive reals unless counts. One symbol, one meaning, in the whole book (chapter 00's
# notation table lists exactly these, in this order; tests/test_notation.py keeps the two in step).
# -- the model
L = sp.Symbol("L", positive=True, integer=True)   # layers
D = sp.Symbol("D", positive=True, integer=True)   # hidden size
H = sp.Symbol("H", positive=True, integer=True)   # query heads
K = sp.Symbol("K", positive=True, integer=True)   # KV heads
G = sp.Symbol("G", positive=True, integer=True)   # query heads per KV head, H / K
d_h = sp.Symbol("d_h", positive=True, integer=True)  # head size
F_ffn = sp.Symbol("F_ffn", positive=True, integer=True)  # FFN size
V = sp.Symbol("V", positive=True, integer=True)   # vocabulary
P = sp.Symbol("P", positive=True)                 # all parameters (every expert), as stored
P_act = sp.Symbol("P_act", positive=True)         # parameters one token uses (MoE: active experts)
P_mm = sp.Symbol("P_mm", positive=True)           # parameters in a token's matmuls (LM head in, embedding out)
P_body = sp.Symbol("P_body", positive=True)       # P_mm without the LM head
P_kv = sp.Symbol("P_kv", positive=True)           # key/value projection parameters
k_tok = sp.Symbol("k_tok", positive=True)         # KV-cache bytes per token
M_w = sp.Symbol("M_w", positive=True)             # bytes of weights stored, P b_w
Q_w = sp.Symbol("Q_w", positive=True)             # bytes of weights one step reads
# -- data types
b_w = sp.Symbol("b_w", positive=True)             # bytes per weight
b_kv = sp.Symbol("b_kv", positive=True)           # bytes per KV element
b_a = sp.Symbol("b_a", positive=True)             # bytes per activation element
# -- the accelerator
F = sp.Symbol("F", positive=True)                 # peak FLOP/s (dense)
W = sp.Symbol("W", positive=True)                 # memory bandwidth, bytes/s
M = sp.Symbol("M", positive=True)                 # memory capacity, bytes
R = sp.Symbol("R", positive=True)                 # ridge point F / W, FLOP/byte (never the reserve: M_res)
beta = sp.Symbol("beta", positive=True)           # one-way link bandwidth, bytes/s
# -- the deployment
N = sp.Symbol("N", positive=True, integer=True)   # tensor-parallel degree (GPUs)
eta_f = sp.Symbol("eta_F", positive=True)         # MFU
eta_w = sp.Symbol("eta_W", positive=True)         # MBU
u = sp.Symbol("u", positive=True)                 # fraction of GPU memory the server may use
M_res = sp.Symbol("M_res", positive=True)         # bytes reserved (activations, CUDA graphs, ...)
M_kv = sp.Symbol("M_kv", positive=True)           # KV pool per GPU, bytes
alpha = sp.Symbol("alpha", positive=True)         # latency per all-reduce hop, seconds
alpha_0 = sp.Symbol("alpha_0", positive=True)     # fixed latency per all-reduce call, seconds
T_oh = sp.Symbol("T_oh", positive=True)           # fixed overhead per step, seconds
# -- requests and steps
B = sp.Symbol("B", positive=True)                 # batch size (sequences decoding together)
S = sp.Symbol("S", positive=True)                 # context length: keys a decode step's new token attends to
L_p = sp.Symbol("L_p", positive=True)             # prompt length (tokens)
L_o = sp.Symbol("L_o", positive=True)             # output length (tokens)
T_1 = sp.Symbol("T_1", positive=True)             # TTFT, seconds
T = sp.Symbol("T", positive=True)                 # TPOT; at a steady batch, one decode step's time T(B)
T_w = sp.Symbol("T_w", positive=True)             # a step's weight-read time, seconds
c = sp.Symbol("c", positive=True)                 # seconds a decode step adds per sequence
I = sp.Symbol("I", positive=True)                 # arithmetic intensity, FLOP/byte
B_crit = sp.Symbol("B_crit", positive=True)       # batch at which a weight matmul turns compute-bound
B_star = sp.Symbol("B^*", positive=True)          # the knee of decode
# -- targets and queues
tau = sp.Symbol("tau", positive=True)             # TPOT SLO, seconds
tau_1 = sp.Symbol("tau_1", positive=True)         # TTFT SLO, seconds
lam = sp.Symbol("lambda", positive=True)          # arrival rate, requests/s
s = sp.Symbol("s", positive=True)                 # mean service time, seconds
rho = sp.Symbol("rho", positive=True)             # utilisation
W_q = sp.Symbol("W_q", positive=True)             # mean wait in the queue, seconds

# symbol -> (library parameter or function, meaning, SI unit)
NOTATION = {
    L: ("ModelConfig.n_layers", "transformer layers", "1"),
    D: ("ModelConfig.hidden_size", "model width", "1"),
    H: ("ModelConfig.n_heads", "query heads", "1"),
    K: ("ModelConfig.n_kv_heads", "key/value heads (K = H: MHA, K = 1: MQA, else GQA)", "1"),
    G: ("ModelConfig.group_size", "query heads that share one KV head, H / K", "1"),
    d_h: ("ModelConfig.head_dim", "size of one attention head", "1"),
    F_ffn: ("ModelConfig.ffn_size", "feed-forward intermediate size", "1"),
    V: ("ModelConfig.vocab_size", "vocabulary size", "1"),
    P: ("models.parameter_count", "all parameters, every expert counted: what is stored", "1"),
    P_act: ("models.active_parameter_count", "parameters one token uses (MoE: active experts; dense: P)", "1"),
    P_mm: ("models.matmul_parameter_count",
           "parameters in one token's matmuls: P_act minus the input embedding (gathered), LM head included", "1"),
    P_body: ("models.body_parameter_count", "P_mm without the LM head: the weights every prompt token multiplies",
             "1"),
    P_kv: ("models.kv_projection_parameter_count", "key and value projection parameters (replicated once N > K)",
           "1"),
    k_tok: ("models.kv_bytes_per_token", "KV-cache bytes one token adds, 2 L K d_h b_kv", "B"),
    M_w: ("models.weight_bytes", "bytes of weights stored, P b_w", "B"),
    Q_w: ("step.Work.weight_bytes",
          "bytes of weights one step reads: (P - V D) b_w plus one embedding row per token (untied)", "B"),
    b_w: ("weight_dtype", "bytes per weight (bf16: 2, fp8: 1, int4: 0.5)", "B"),
    b_kv: ("kv_dtype", "bytes per KV-cache element", "B"),
    b_a: ("compute_dtype", "bytes per activation element", "B"),
    F: ("Accelerator.peak_flops", "dense peak compute of a data type", "FLOP/s"),
    W: ("Accelerator.memory_bandwidth", "peak memory bandwidth", "B/s"),
    M: ("Accelerator.memory_bytes", "memory capacity (decimal bytes from the spec sheet)", "B"),
    R: ("Accelerator.ridge_point", "ridge point F / W (with efficiencies: F eta_F / (W eta_W))", "FLOP/B"),
    beta: ("Accelerator.interconnect_bandwidth", "one-way GPU-to-GPU link bandwidth", "B/s"),
    N: ("tensor_parallel", "GPUs one model is split across", "1"),
    eta_f: ("mfu", "model FLOP utilisation: achieved / peak FLOP/s", "1"),
    eta_w: ("mbu", "memory-bandwidth utilisation: achieved / peak bandwidth", "1"),
    u: ("gpu_memory_utilization", "fraction of GPU memory the server may use (vLLM: 0.9)", "1"),
    M_res: ("reserve_bytes", "memory kept back for activations, CUDA graphs, ...", "B"),
    M_kv: ("memory.memory_available_for_kv", "KV pool of one GPU: u M - M_res - its weights", "B"),
    alpha: ("allreduce_latency", "latency per all-reduce hop", "s"),
    alpha_0: ("allreduce_base_latency", "fixed latency per all-reduce call", "s"),
    T_oh: ("step_overhead", "fixed time added to every step (launches, scheduling)", "s"),
    B: ("batch_size", "sequences decoded together in one step", "1"),
    S: ("context_len", "keys a decode step's new token attends to, its own included", "tokens"),
    L_p: ("prompt_len", "prompt (input) length", "tokens"),
    L_o: ("output_len", "generated (output) length", "tokens"),
    T_1: ("prefill.ttft", "TTFT: time to the first output token", "s"),
    T: ("decode.decode_step_time", "TPOT, first token excluded; at a steady batch one decode step, T(B)", "s"),
    T_w: ("decode.decode_coefficients", "time of a step's weight read, Q_w / (W eta_W)", "s"),
    c: ("decode.decode_coefficients", "seconds a decode step adds per sequence (T = T_w + c B)", "s"),
    I: ("roofline.arithmetic_intensity", "arithmetic intensity: FLOPs per byte moved", "FLOP/B"),
    B_crit: ("roofline.critical_batch_size", "batch at which a weight matmul turns compute-bound", "1"),
    B_star: ("decode.knee_batch_size", "the knee: batch at which a decode step turns compute-bound", "1"),
    tau: ("tpot_slo", "target time per output token", "s"),
    tau_1: ("ttft_slo", "target time to first token", "s"),
    lam: ("arrival_rate", "request arrival rate", "req/s"),
    s: ("service_time", "mean service time of one request", "s"),
    rho: ("queueing.utilisation", "fraction of time the server is busy, lambda s", "1"),
    W_q: ("queueing.md1_mean_wait", "mean wait in the queue (M/D/1 here; M/M/1, M/G/1 alike)", "s"),
}


def symbol_table():
    """Rows (symbol, library name, meaning, unit) for the notation table.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    return [(str(sym), *info) for sym, info in NOTATION.items()]


def numpy_function(symbols, expression):
    """``sympy.lambdify(symbols, expression)`` evaluated with numpy: broadcasts over arrays.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

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

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

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
