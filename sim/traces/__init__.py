"""Drafting traces: the format, where traces come from, and how they are made.

- :mod:`~ahasd.sim.traces.format`: the trace file format, :class:`Trace`, the loader and
  writer, the shipped traces (``sim/data``).
- :mod:`~ahasd.sim.traces.sources`: a run's ``--trace`` value to a trace.
- :mod:`~ahasd.sim.traces.synthetic`: the regime-switching generator, its cited presets, and
  i.i.d. traces.
- :mod:`~ahasd.sim.traces.sampling`: one recorded position of rejection sampling, shared by
  the recorders.
- :mod:`~ahasd.sim.traces.ngram`: the character n-gram pair of the Python stdlib and the
  shipped traces' recorder.
- :mod:`~ahasd.sim.traces.hf`: the Hugging Face ``transformers`` recorder (optional extra).

The format is documented in ``docs/traces.md``; ``ahasd trace`` is :mod:`ahasd.cli.trace`.
"""
