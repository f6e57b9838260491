"""Labelled synthetic crash logs for advisor's learned classifier.

Every example is one paste of log lines as an operator would hand it over: raw application
output, ``journalctl -u`` in its short forms, ``docker``/``kubectl logs`` with timestamps, or a
``systemctl status`` block. Examples are built from composable pieces (the engines' documented
formats are the only source of the formats):

* an engine (vLLM 0.5 … 0.33 with each version's logger format and process prefixes, SGLang
  0.4/0.5, TGI) and its startup phases up to the failing one (weights, profiling, KV cache,
  CUDA graphs, sampler warm-up, API readiness, serving);
* one failure family per label (tracebacks through the phase's functions, the decisive error
  sentence, worker and EngineCore tracebacks interleaved, systemd's reaction, kernel lines);
* a line shape (renderer) and perturbations: head truncated, lines dropped, traceback head
  removed, tail cut, ANSI kept or stripped, reworded decisive sentences, noise lines.

Lines that decide the label are marked ``key`` and survive every perturbation, so no example
silently turns into "unknown".

Deterministic: stdlib only (plus advisor's shared message texts), a seeded
``random.Random`` per example, gzip mtime 0 — running it twice writes the same bytes.

A label is one module in ``corpus.families`` defining its ``FAMILY``.
"""
