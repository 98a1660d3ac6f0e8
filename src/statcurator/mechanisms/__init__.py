"""Exact samplers over a secure RNG, and the noise mechanisms built on them.

Every mechanism is a frozen dataclass that states its privacy map (``cost``,
``privacy_map(d)``) and its accuracy (``accuracy(alpha)``); every random draw is exact
(discrete Laplace / discrete Gaussian / Bernoulli(e^-γ) in the style of Canonne, Kamath &
Steinke 2020) and comes from the operating system's secure generator (:mod:`.rng`).

>>> from fractions import Fraction
>>> from statcurator.mechanisms import LaplaceMechanism, epsilon_for_accuracy
>>> LaplaceMechanism(sensitivity=1, epsilon=Fraction(1, 2)).scale
Fraction(2, 1)
>>> sorted(MECHANISMS)[:3]
['exponential', 'gaussian', 'geometric']
"""

from __future__ import annotations

from . import rng, samplers
from .accuracy import epsilon_for_accuracy
from .exponential import ExponentialMechanism, ReportNoisyMax, sample_exponential
from .gaussian import GaussianMechanism, VectorGaussianMechanism
from .laplace import GeometricMechanism, LaplaceMechanism, VectorLaplaceMechanism
from .partition import PartitionSelection
from .policy import OrderedMechanism, PolicyHistogram
from .quantile import JointQuantiles, QuantileMechanism
from .randomized_response import RandomizedResponse
from .smooth import SmoothSensitivityMechanism
from .sparse_vector import AboveThreshold, SparseVector

__all__ = [
    "rng",
    "samplers",
    "LaplaceMechanism",
    "GeometricMechanism",
    "VectorLaplaceMechanism",
    "GaussianMechanism",
    "VectorGaussianMechanism",
    "ExponentialMechanism",
    "ReportNoisyMax",
    "SparseVector",
    "AboveThreshold",
    "RandomizedResponse",
    "PartitionSelection",
    "PolicyHistogram",
    "OrderedMechanism",
    "QuantileMechanism",
    "JointQuantiles",
    "SmoothSensitivityMechanism",
    "epsilon_for_accuracy",
    "sample_exponential",
    "MECHANISMS",
]

#: the mechanisms by their short names (as used by the CLI)
MECHANISMS: dict[str, type] = {
    "laplace": LaplaceMechanism,
    "geometric": GeometricMechanism,
    "vector-laplace": VectorLaplaceMechanism,
    "gaussian": GaussianMechanism,
    "vector-gaussian": VectorGaussianMechanism,
    "exponential": ExponentialMechanism,
    "report-noisy-max": ReportNoisyMax,
    "sparse-vector": SparseVector,
    "randomized-response": RandomizedResponse,
    "partition-selection": PartitionSelection,
}
