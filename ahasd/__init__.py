"""AHASD: asynchronous heterogeneous speculative decoding, reference implementation.

Subpackages: ``ahasd.hw`` (Amaranth RTL), ``ahasd.golden`` (NumPy golden models),
``ahasd.sim`` (system model). ``ahasd.params`` holds the parameter dataclasses the RTL
and golden models share.
"""

__version__ = "0.1.0"
