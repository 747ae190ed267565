"""servingmath: the arithmetic of LLM serving, the shared library of the book.

Import the modules you need; importing has no side effects:

>>> from servingmath import models, hardware, decode
>>> round(decode.decode_step_time("Llama-2-7B", "H100", batch_size=1, context_len=0) * 1e3, 2)
4.02

Modules, one concept each: ``units``, ``datatypes``, ``hardware``, ``models``,
``roofline``, ``decode``, ``prefill``, ``parallelism``, ``metrics``,
``symbolic``, ``checks`` (exercise checker), ``questions`` (the question bank).
"""

__version__ = "0.1.0"
