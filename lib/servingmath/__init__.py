"""servingmath: the arithmetic of LLM serving, the shared library of the book.

Import the modules you need; importing has no side effects:

>>> from servingmath import models, hardware, decode
>>> round(decode.decode_step_time("Llama-2-7B", "H100", batch_size=1, context_len=0) * 1e3, 2)
3.94

Modules, one concept each:

* facts: ``units``, ``datatypes``, ``hardware`` (accelerator catalog), ``models`` (model catalog);
* step times: ``roofline``, ``memory``, ``decode``, ``prefill``, ``parallelism``, ``quantization``;
* operating points: ``pareto``, ``slo``, ``explorer`` (the widget), ``metrics``;
* load: ``queueing`` (closed forms), ``workloads``, ``simulate`` (the serving simulator);
* the book: ``symbolic`` (notation, formula checks), ``plotting``, ``checks`` (exercise
  checker), ``questions`` (the question bank), ``assignments`` (classroom variants and grading),
  ``drill`` (the terminal interview drill), ``validation`` (the model against measurements).
"""

__version__ = "0.1.0"
