"""Re-run the cases of the core issue (one step model, one deployment) and print what each gives now.

    .venv/bin/python tools/issue_checks.py

Each line is a case where two parts of the library used to disagree, or a number the old step
model got wrong; now they agree (or refuse with a clear error).
"""

from __future__ import annotations

import numpy as np

from servingmath import decode, memory, parallelism, prefill, roofline
from servingmath import simulate as sim
from servingmath.models import get_model


def main() -> None:
    t_dec = decode.decode_step_time("Llama-3.1-70B", "H100", 256, 2048, tensor_parallel=8, weight_dtype="fp8")
    t_tp = parallelism.tensor_parallel_decode_time("Llama-3.1-70B", "H100", 256, 2048, tensor_parallel=8,
                                                   weight_dtype="fp8")
    print(f"70B fp8, 8 x H100, B 256, S 2048: decode {t_dec * 1e3:.2f} ms, parallelism {t_tp * 1e3:.2f} ms")
    server = sim.Server("Llama-3.1-405B", "H100", tensor_parallel=16)
    print(f"405B TP 16: simulator KV capacity {server.kv_capacity():,} tokens, memory.max_kv_tokens "
          f"{memory.max_kv_tokens('Llama-3.1-405B', 'H100', tensor_parallel=16):,} tokens")
    d = decode.decode_step_time("Mistral-7B", "H100", 32, 16_000)
    p = prefill.prefill_time("Mistral-7B", "H100", 1, cached_len=15_999, batch_size=32)
    print(f"Mistral-7B, B 32, S 16000: decode {d * 1e3:.2f} ms, 32 one-token prefills {p * 1e3:.2f} ms")
    try:
        decode.decode_step_time("Llama-3.1-8B", "H100", 8, 1024, tensor_parallel=3)
    except ValueError as error:
        print(f"tensor_parallel=3 on 32 heads: ValueError: {error}")
    arr = decode.decode_step_time("Llama-3.1-70B", "H100", 64, 2048, tensor_parallel=8,
                                  allreduce_latency=np.array([0.0, 0.6e-6]))
    print("array allreduce_latency:", np.round(arr * 1e3, 3), "ms")
    bound = decode.decode_step_time("Llama-3.1-8B", "H100", 1, 1)
    print(f"Llama-3.1-8B batch 1 on H100, physical bound: {bound * 1e3:.2f} ms; knee "
          f"{decode.knee_batch_size('Llama-3.1-8B', 'H100'):.1f} vs ridge {roofline.ridge_point('H100'):.1f}")
    m = get_model("Llama-3.1-8B")
    print(f"  weights read per step: {decode.decode_step_parts('Llama-3.1-8B', 'H100', 1, 1)['weight_memory'] * 3.35e12 / 1e9:.2f} GB "
          f"(embedding table {m.vocab_size * m.hidden_size * 2 / 1e9:.2f} GB gathered, not streamed)")


if __name__ == "__main__":
    main()
