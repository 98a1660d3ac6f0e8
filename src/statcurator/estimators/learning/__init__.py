"""DP learning: ID3 decision trees and forests (Friedman & Schuster 2010) and k-means.

Each learner is scikit-learn shaped (``fit``, ``predict``, ``predict_proba``) and is a
:class:`~statcurator.core.measurement.Measurement` (``learner.measurement(meta)``): the cost
charged is the privacy map of the object that fits.

>>> 'DecisionTreeClassifier' in __all__
True
"""

from __future__ import annotations

from ._domain import Attribute, binned, categorical, domain_from_meta
from .kmeans import KMeans, SampleAggregateKMeans
from .policy_kmeans import PolicyKMeans
from .tree import DecisionTreeClassifier, RandomForestClassifier

__all__ = ["DecisionTreeClassifier", "RandomForestClassifier", "KMeans",
           "SampleAggregateKMeans", "PolicyKMeans", "Attribute", "categorical", "binned",
           "domain_from_meta"]
