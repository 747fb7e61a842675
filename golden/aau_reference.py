"""Float64 references of the AAU's modes (values, not codes): what the golden model's
fixed-point results are measured against (``bench/aau_accuracy.py``, the accuracy tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ahasd.golden.aau import GELU_CUBIC

__all__ = [
    "RefStats",
    "reference_gelu",
    "reference_layernorm",
    "reference_rmsnorm",
    "reference_silu",
    "reference_softmax",
    "reference_stats",
]


@dataclass(frozen=True)
class RefStats:
    """Float64 reference results (values, not codes): max, argmax, Z, top1, entropy."""

    max: float
    argmax: int
    z: float
    top1: float
    entropy: float


def reference_stats(x_float: object) -> RefStats:
    """Exact-arithmetic (float64) STATS of logits given as values (not codes)."""
    values = np.asarray(x_float, dtype=np.float64)
    index = int(np.argmax(values))
    delta = values - values[index]
    weights = np.exp(delta)
    z = float(np.sum(weights))
    entropy = math.log(z) - float(np.dot(weights, delta)) / z
    return RefStats(float(values[index]), index, z, 1.0 / z, entropy)


def reference_softmax(x_float: object) -> np.ndarray:
    """Float64 softmax of logits given as values."""
    values = np.asarray(x_float, dtype=np.float64)
    weights = np.exp(values - values.max())
    return weights / weights.sum()


def reference_layernorm(
    x_float: object, gamma_float: object, beta_float: object, eps: float
) -> np.ndarray:
    """Float64 LayerNorm of values (population variance): ``(x - mean) / sqrt(var + eps) *
    gamma + beta``."""
    values = np.asarray(x_float, dtype=np.float64)
    centred = values - values.mean()
    return centred / np.sqrt(np.mean(centred * centred) + eps) * gamma_float + beta_float


def reference_rmsnorm(
    x_float: object, gamma_float: object, beta_float: object, eps: float
) -> np.ndarray:
    """Float64 RMSNorm of values: ``x / sqrt(mean(x**2) + eps) * gamma + beta``."""
    values = np.asarray(x_float, dtype=np.float64)
    return values / np.sqrt(np.mean(values * values) + eps) * gamma_float + beta_float


def reference_silu(x_float: object) -> np.ndarray:
    """Float64 SiLU of values: ``x * sigmoid(x)``."""
    values = np.asarray(x_float, dtype=np.float64)
    return values / (1.0 + np.exp(-values))


def reference_gelu(x_float: object) -> np.ndarray:
    """Float64 GELU of values, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x**3)))``."""
    values = np.asarray(x_float, dtype=np.float64)
    inner = math.sqrt(2.0 / math.pi) * (values + GELU_CUBIC * values**3)
    return 0.5 * values * (1.0 + np.tanh(inner))
