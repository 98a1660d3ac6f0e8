"""DP regression, scikit-learn shaped: AdaSSP linear regression, objective-perturbation
logistic regression.

Both work on features rescaled with their **declared** bounds (x ↦ (x - mid)/half, so every
row has a known norm) and report coefficients in the original units (``coef_``,
``intercept_``), with ``fit``, ``predict`` and ``score`` as in scikit-learn. Each is a
:class:`~statcurator.core.measurement.Measurement` (``model.measurement(meta, loss)``) whose
function returns a fitted copy of the model; ``Curator.estimate`` charges its cost.

* :class:`LinearRegression` — sufficient-statistics perturbation with an adaptive ridge
  (AdaSSP, Wang 2018): X'X, X'y and λ_min(X'X) are released with exact discrete Gaussian
  noise (ρ/3 each, zCDP; an (ε, δ) budget is converted), the ridge
  λ = max(0, σ·√(d·ln(2d²/0.05)) - λ̃_min) with λ̃_min a 99.7%-lower bound of the noisy
  λ_min, and θ = (X̃'X̃ + λI)⁻¹ X̃'ỹ. Rounding to the public grid is added to the L2
  sensitivities.
* :class:`LogisticRegression` — objective perturbation (Chaudhuri, Monteleoni & Sarwate
  2011, Algorithm 2), in the unnormalized form Σℓ(yθ'z) + (Λ/2)‖θ‖² + b'θ with Λ = 1/C:
  b has density ∝ exp(-β‖b‖); a neighbour moves b by at most G (G = 1 row added or
  removed, 2 for a changed row) and the Jacobian by a factor (1 + c/Λ)^G (c = 1/4 bounds
  ℓ''), so ε = Gβ + G·ln(1 + c/Λ); Λ is raised to c/(e^(ε/2G) - 1) when the requested C
  leaves no room. Pure ε-DP. The minimizer is found by damped Newton steps to a gradient
  norm of 1e-9 (as for every implementation, the guarantee is for the exact minimizer).

>>> import numpy as np
>>> r = np.random.default_rng(0)
>>> x = r.uniform(0, 10, 20000); y = 3 * x + 5 + r.normal(0, 1, 20000)
>>> m = LinearRegression(epsilon=1, delta=1e-6, bounds={"x": (0, 10), "y": (-10, 50)})
>>> _ = m.fit(x.reshape(-1, 1), y)
>>> abs(m.coef_[0] - 3) < 0.2 and abs(m.intercept_ - 5) < 1
True
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError, MetadataError
from ..core.measurement import Measurement
from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from ..core.numbers import exact, exp_bounds, ln_bounds, sqrt_bounds
from ..core.relations import ChangeOne, Relation
from ..core.schema import Column, TableMeta
from ..mechanisms import GaussianMechanism, samplers
from ..mechanisms._base import array_to_grid_units
from ..mechanisms.smooth import FLOAT_NOISE_SLACK, ball_noise
from ._common import clamp, column_values, raw_values, scaled_map
from ._protocol import _loss_from_dict, _loss_to_dict, loss_from, relation_of

__all__ = ["LinearRegression", "LogisticRegression"]

#: grid of the released sufficient statistics (their noise is far larger)
_SSP_GRID = Fraction(1, 2**16)


class _Regression:
    """Shared: parameters, declared bounds, the rescaling, the protocol, JSON."""

    statistic = "regression"
    supports_person_level = False
    _measures: tuple[type[PrivacyLoss], ...] = ()

    def __init__(self, epsilon: Any = None, *, delta: Any = None, rho: Any = None,
                 target: str | None = None, features: Sequence[str] | None = None,
                 bounds: Mapping[str, Any] | None = None, fit_intercept: bool = True) -> None:
        self.epsilon, self.delta, self.rho = epsilon, delta, rho
        self.target, self.features = target, None if features is None else tuple(features)
        self.bounds = None if bounds is None else dict(bounds)
        self.fit_intercept = bool(fit_intercept)

    # -- scikit-learn shape ----------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (scikit-learn's ``clone`` protocol)."""
        return {k: getattr(self, k) for k in self._param_names()}

    def _param_names(self) -> tuple[str, ...]:
        return ("epsilon", "delta", "rho", "target", "features", "bounds", "fit_intercept")

    def sample(self, data: Any, size: int, meta: Any = None) -> np.ndarray:
        """``size`` independent fits on the same table: rows of (coef..., intercept), for
        tests and benchmarks."""
        meta = self._meta(meta if meta is not None else getattr(data, "meta", None))
        loss = self._loss(None)
        fit = self._fitter(meta, loss, relation_of(meta))
        try:
            return np.asarray(fit(data, size))
        except TypeError:  # a fitter without a vectorized path
            return np.array([np.append(m.coef_, m.intercept_)
                             for m in (fit(data) for _ in range(size))])

    def fit(self, X: Any, y: Any = None) -> Any:
        """Fit on a table (with ``target``/``features``) or on arrays ``X`` (n × p), ``y``."""
        table, meta = self._local(X, y)
        fitted = self.measurement(meta)(table)
        self.__dict__.update({k: v for k, v in vars(fitted).items() if k.endswith("_")})
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predictions for the rows of ``X`` (an array, or a table with the features)."""
        return self._linear(X)

    def _linear(self, X: Any) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise InvalidParameterError(f"this {type(self).__name__} is not fitted",
                                        remedy="call fit(...) (or Curator.estimate) first")
        arr = self._matrix(X)
        return arr @ np.asarray(self.coef_) + self.intercept_

    def _matrix(self, X: Any) -> np.ndarray:
        if isinstance(X, np.ndarray | list):
            arr = np.asarray(X, dtype=float)
            return arr.reshape(-1, 1) if arr.ndim == 1 else arr
        return np.column_stack([column_values(X, c) for c in self.features_])

    # -- the protocol ----------------------------------------------------------------------
    def columns(self, meta: Any = None) -> tuple[str, ...]:
        """Features then target."""
        return (*self._feature_names(meta), self._target_name())

    def describe(self) -> str:
        """One line for the ledger."""
        return (f"{type(self).__name__}(target={self.target!r}, features="
                f"{list(self.features) if self.features else None}, "
                f"fit_intercept={self.fit_intercept})")

    def _target_name(self) -> str:
        if self.target is None:
            raise InvalidParameterError(f"{type(self).__name__} needs a target column",
                                        remedy="pass target='y' (and features=[...])")
        return self.target

    def _feature_names(self, meta: Any) -> tuple[str, ...]:
        if self.features is not None:
            return self.features
        if meta is None:
            raise InvalidParameterError("no features given", remedy="pass features=[...]")
        return tuple(c.name for c in meta.columns
                     if c.name != self.target and c.bounds is not None)

    def _loss(self, loss: PrivacyLoss | None) -> PrivacyLoss:
        if loss is None:
            loss = loss_from(self.epsilon, self.delta, self.rho)
        if loss is None:
            raise InvalidParameterError(f"no privacy budget for {type(self).__name__}",
                                        remedy="pass epsilon=... (to the model, or to "
                                               "Curator.estimate)")
        if isinstance(loss, ApproxDP) and loss.delta == 0:
            loss = PureDP(loss.epsilon)
        if not isinstance(loss, self._measures):
            names = ", ".join(m.__name__ for m in self._measures)
            raise InvalidParameterError(f"{type(self).__name__} is calibrated as {names}, "
                                        f"not {type(loss).__name__}",
                                        remedy="pass epsilon and delta (or rho) accordingly"
                                        if ZCDP in self._measures else "pass epsilon only")
        return loss

    def _meta(self, meta: Any) -> TableMeta:
        if meta is None:
            if self.bounds is None:
                raise MetadataError(f"{type(self).__name__} needs declared bounds",
                                    remedy="pass bounds={'x': (0, 10), 'y': (0, 1)}")
            return TableMeta("data", tuple(Column(str(c), type="real", bounds=tuple(b))
                                           for c, b in self.bounds.items()))
        if self.bounds:
            cols = {c.name: c for c in meta.columns}
            for c, b in self.bounds.items():
                cols[c] = Column(c, type="real", bounds=tuple(b))
            meta = meta.replace(columns=tuple(cols.values()))
        return meta

    def _scaling(self, meta: TableMeta, names: Sequence[str]
                 ) -> tuple[np.ndarray, np.ndarray, list[tuple[Fraction, Fraction]]]:
        ranges = []
        for c in names:
            b = meta[c].bounds
            if b is None:
                raise MetadataError(f"column {c!r} has no declared bounds",
                                    remedy=f"declare bounds = [low, high] for {c!r}")
            ranges.append(b)
        mid = np.array([float(a + b) / 2 for a, b in ranges])
        half = np.array([max(float(b - a) / 2, 1e-300) for a, b in ranges])
        return mid, half, ranges

    def _local(self, X: Any, y: Any) -> tuple[Any, TableMeta | None]:
        meta = getattr(X, "meta", None)
        if y is None:
            return X, meta
        arr = np.asarray(X, dtype=float)
        arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
        if self.target is None:
            self.target = "y"
        declared = tuple(k for k in (self.bounds or {}) if k != self.target)
        names = self.features or (declared if len(declared) == arr.shape[1] else
                                  tuple(f"x{i}" for i in range(arr.shape[1])))
        self.features = names
        table = {c: arr[:, i] for i, c in enumerate(names)}
        table[self.target] = np.asarray(y, dtype=float) if not _is_labels(y) else \
            np.asarray(y)
        return table, meta

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """The model as a Measurement: its function fits on a table and returns a fitted
        copy; its privacy map is the cost under the table's neighbour relation."""
        meta = self._meta(meta)
        loss = self._loss(loss)
        relation = relation_of(meta)
        fit = self._fitter(meta, loss, relation)
        return Measurement(relation, type(loss), fit, self._privacy_map(loss, relation),
                           f"{type(self).__name__}: {self._mechanism}")

    def _privacy_map(self, loss: PrivacyLoss, relation: Relation) -> Any:
        return scaled_map(loss)

    _mechanism = ""

    def _fitter(self, meta: TableMeta, loss: PrivacyLoss, relation: Relation) -> Any:
        raise NotImplementedError  # pragma: no cover

    def _copy(self, **fitted: Any) -> Any:
        new = type(self)(**self.get_params())
        new.__dict__.update(fitted)
        return new

    # -- results in the ledger -------------------------------------------------------------
    def to_json(self) -> str:
        """The fitted model as JSON (coefficients and cost)."""
        return json.dumps({"model": type(self).__name__, "params": _plain(self.get_params()),
                           "fitted": {k: _plain(v) for k, v in vars(self).items()
                                      if k.endswith("_")}})

    def result_to_json(self, result: Any) -> str:
        """How ``Curator.estimate`` stores a fitted copy."""
        return result.to_json()

    def result_from_json(self, text: str) -> Any:
        """The fitted copy a replay returns."""
        d = json.loads(text)
        fitted = {k: (np.asarray(v) if isinstance(v, list) else v)
                  for k, v in d["fitted"].items()}
        if isinstance(fitted.get("cost_"), dict):
            fitted["cost_"] = _loss_from_dict(fitted["cost_"])
        return self._copy(**fitted, replayed_=True)


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, PrivacyLoss):
        return _loss_to_dict(v)
    if isinstance(v, Fraction):
        return float(v)
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _is_labels(y: Any) -> bool:
    arr = np.asarray(y)
    return arr.dtype.kind in "OUSb"


# -- AdaSSP ------------------------------------------------------------------------------------


class LinearRegression(_Regression):
    """Linear regression by AdaSSP (Wang 2018), ρ-zCDP (or (ε, δ) via conversion).

    ``bounds`` (or the metadata) must declare every feature's and the target's range.
    Accuracy (Wang 2018, Thm 3): with the features rescaled to [-1, 1], the excess
    empirical risk is of order d·σ/(λ_min + d·σ)·‖θ*‖², σ the noise's standard deviation
    (``ridge_`` reports the ridge λ the release chose) — it vanishes as n grows.

    >>> import statcurator as sc
    >>> LinearRegression(epsilon=1, delta=1e-6, target="y", features=["x"],
    ...                  bounds={"x": (0, 1), "y": (0, 1)}).measurement().cost
    ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000))
    """

    statistic = "linear regression"
    _measures = (ZCDP, ApproxDP)
    _mechanism = "AdaSSP (Wang 2018), discrete Gaussian sufficient statistics"

    def _rho(self, loss: PrivacyLoss) -> Fraction:
        if isinstance(loss, ZCDP):
            return loss.rho
        return GaussianMechanism.from_epsilon_delta(1, loss.epsilon,  # type: ignore[attr-defined]
                                                    loss.delta).rho  # type: ignore[attr-defined]

    def _privacy_map(self, loss: PrivacyLoss, relation: Relation) -> Any:
        rho = self._rho(loss)
        if isinstance(loss, ZCDP):
            return lambda d: ZCDP(rho * math.ceil(d) ** 2)
        delta = loss.delta  # type: ignore[attr-defined]
        # at one step the requested (ε, δ), which the conversion of ρ fits under
        return lambda d: ApproxDP(0, 0) if d == 0 else loss if d <= 1 else ZCDP(
            rho * math.ceil(d) ** 2).to_approx(delta)

    def _fitter(self, meta: TableMeta, loss: PrivacyLoss, relation: Relation) -> Any:
        feats = self._feature_names(meta)
        target = self._target_name()
        mid, half, ranges = self._scaling(meta, (*feats, target))
        p = len(feats)
        d = p + (1 if self.fit_intercept else 0)
        x2 = d  # ‖z‖² <= d for z in [-1, 1]^p (and the constant 1)
        g = 2 if isinstance(relation, ChangeOne) else 1  # Frobenius steps per neighbour
        rho = self._rho(loss) / 3
        tri = np.triu_indices(d)
        n_tri = tri[0].size

        def sigma2(sens: Fraction, coords: int) -> Fraction:
            units = sens / _SSP_GRID + math.isqrt(coords - 1) + 1  # + rounding: √c units
            return units * units / (2 * rho)

        s2_lam = sigma2(Fraction(x2), 1)
        s2_xx = sigma2(Fraction(g * x2), n_tri)
        s2_xy = sigma2(g * sqrt_bounds(Fraction(x2), 40)[1], d)

        def noisy(v: np.ndarray, s2: Fraction, size: int) -> np.ndarray:
            """``size`` noisy copies of v (rows), on the grid."""
            units = array_to_grid_units(np.asarray(v, dtype=np.float64), _SSP_GRID)
            draws = samplers.discrete_gaussian(s2, size * units.size).reshape(size, units.size)
            return (units[None, :] + draws).astype(np.float64) * float(_SSP_GRID)

        sd_lam = math.sqrt(float(s2_lam)) * float(_SSP_GRID)
        sd_xx = math.sqrt(float(s2_xx)) * float(_SSP_GRID)
        spread = sd_xx * math.sqrt(d * math.log(2 * d * d / 0.05))

        def thetas(table: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
            """``size`` independent releases: (θ in the rescaled units, ridges)."""
            cols = [clamp(column_values(table, c), a, b)
                    for c, (a, b) in zip((*feats, target), ranges, strict=True)]
            Z = np.column_stack([(cols[i] - mid[i]) / half[i] for i in range(p)]
                                + ([np.ones(cols[0].shape[0])] if self.fit_intercept else []))
            yz = (cols[-1] - mid[-1]) / half[-1]
            xx = Z.T @ Z
            lam_min = float(np.linalg.eigvalsh(xx)[0]) if Z.shape[0] else 0.0
            lam_noisy = noisy(np.array([lam_min]), s2_lam, size)[:, 0]
            ridge = np.maximum(0.0, spread - np.maximum(lam_noisy - 3 * sd_lam, 0.0))
            up = noisy(xx[tri], s2_xx, size)
            xy_n = noisy(Z.T @ yz, s2_xy, size)
            out = np.empty((size, d))
            for r in range(size):
                m = np.zeros((d, d))
                m[tri] = up[r]
                m = m + np.triu(m, 1).T + ridge[r] * np.eye(d)
                out[r] = np.linalg.lstsq(m, xy_n[r], rcond=None)[0]
            return out, ridge

        def original_units(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            coef = half[-1] * theta[:, :p] / half[None, :p]
            icpt = mid[-1] + half[-1] * ((theta[:, p] if self.fit_intercept else 0.0)
                                          - (theta[:, :p] * mid[None, :p] / half[None, :p])
                                          .sum(axis=1))
            return coef, icpt

        def fit(table: Any, size: int | None = None) -> Any:
            theta, ridge = thetas(table, 1 if size is None else size)
            coef, icpt = original_units(theta)
            if size is not None:
                return np.column_stack([coef, icpt])
            return self._copy(coef_=coef[0], intercept_=float(icpt[0]), features_=feats,
                              ridge_=float(ridge[0]), cost_=loss, n_features_in_=p)

        return fit

    def score(self, X: Any, y: Any) -> float:
        """R² of the predictions (post-processing, not private if y is private)."""
        yy = np.asarray(y, dtype=float)
        res = yy - self.predict(X)
        return 1 - float(res @ res) / float(((yy - yy.mean()) ** 2).sum())


# -- objective perturbation ------------------------------------------------------------------


class LogisticRegression(_Regression):
    """Logistic regression by objective perturbation (Chaudhuri, Monteleoni & Sarwate
    2011), pure ε-DP; ``C`` is scikit-learn's inverse regularization (Λ = 1/C, raised
    when ε requires it). Labels: the target's two declared categories (the second is the
    positive class), 0/1 numbers, or booleans. Accuracy: the noise term b'θ has
    ‖b‖ ~ Gamma(d, 1/β), mean d/β ≈ 2Gd/ε, against a data term that grows with n, so the
    coefficients' error falls like d/(εn) (CMS 2011, Thm 18).

    >>> LogisticRegression(epsilon=1, target="y", features=["x"],
    ...                    bounds={"x": (0, 1), "y": (0, 1)}).measurement().cost
    PureDP(epsilon=Fraction(1, 1))
    """

    statistic = "logistic regression"
    _measures = (PureDP,)
    _mechanism = "objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011)"

    def __init__(self, epsilon: Any = None, *, C: float = 1.0, target: str | None = None,
                 features: Sequence[str] | None = None, bounds: Mapping[str, Any] | None = None,
                 fit_intercept: bool = True, classes: Sequence[Any] | None = None) -> None:
        super().__init__(epsilon, target=target, features=features, bounds=bounds,
                         fit_intercept=fit_intercept)
        self.C = C
        self.classes = None if classes is None else tuple(classes)

    def _param_names(self) -> tuple[str, ...]:
        return ("epsilon", "C", "target", "features", "bounds", "fit_intercept", "classes")

    def _meta(self, meta: Any) -> TableMeta:
        if meta is None and self.bounds is not None and self.target not in self.bounds:
            bounds = dict(self.bounds)
            meta = TableMeta("data", tuple(Column(str(c), type="real", bounds=tuple(b))
                                           for c, b in bounds.items())
                             + (Column(self._target_name(), type="string"),))
            return meta
        return super()._meta(meta)

    def calibration(self, epsilon: Fraction, relation: Relation) -> tuple[Fraction, Fraction]:
        """(Λ, β): the regularization used and the rate of the noise density."""
        g = 2 if isinstance(relation, ChangeOne) else 1
        eps = epsilon - FLOAT_NOISE_SLACK
        c = Fraction(1, 4)
        lam = exact(1 / exact(self.C, "C"), "1/C")
        e_lo = exp_bounds(eps / (2 * g), 64)[0]
        lam = max(lam, c / (e_lo - 1))
        beta = (eps - g * ln_bounds(1 + c / lam, 64)[1]) / g
        if beta <= 0:
            raise InvalidParameterError(f"epsilon={epsilon} is too small",
                                        remedy="use a larger epsilon")
        return lam, beta

    def _labels(self, meta: TableMeta, values: Any) -> np.ndarray:
        """±1 labels, row by row and never refusing a value (the labels are private).

        With two declared classes (``classes`` or the target's categories) a row is +1 when
        its label is the second class (or its text) and -1 otherwise; without them +1 is the
        label 1 (or True) and -1 anything else — 0, other numbers, NULL, text. The map is
        1-stable, so the calibration is unchanged, and no error can reveal a label after
        the charge."""
        target = self._target_name()
        cats = self.classes or (meta[target].categories if target in meta else None)
        arr = np.asarray(values).reshape(-1)
        if cats is not None:
            if len(cats) != 2:
                raise MetadataError(f"{target!r} declares {len(cats)} categories, not 2",
                                    remedy="pass classes=(negative, positive)")
            positive = cats[1]
            return np.array([1.0 if _same(v, positive) else -1.0 for v in arr.tolist()])
        if arr.dtype.kind in "iufb":
            return np.where(arr.astype(np.float64) == 1.0, 1.0, -1.0)
        return np.array([1.0 if _same(v, 1) else -1.0 for v in arr.tolist()])

    def _fitter(self, meta: TableMeta, loss: PrivacyLoss, relation: Relation) -> Any:
        feats = self._feature_names(meta)
        mid, half, ranges = self._scaling(meta, feats)
        p = len(feats)
        d = p + (1 if self.fit_intercept else 0)
        root = math.sqrt(d) * (1 + 2.0**-40)  # ‖z‖ <= 1 after dividing by √d (rounded up)
        lam, beta = self.calibration(loss.epsilon, relation)  # type: ignore[attr-defined]
        lam_f = float(lam)

        def fit(table: Any) -> LogisticRegression:
            cols = [clamp(column_values(table, c), a, b)
                    for c, (a, b) in zip(feats, ranges, strict=True)]
            n = cols[0].shape[0] if cols else 0
            Z = np.column_stack([(cols[i] - mid[i]) / half[i] for i in range(p)]
                                + ([np.ones(n)] if self.fit_intercept else [])) / root
            y = self._labels(meta, raw_values(table, self._target_name()))
            b = ball_noise(d, beta)

            theta = _newton(Z, y, lam_f, b)
            coef = theta[:p] / (half * root)
            icpt = (theta[p] / root if self.fit_intercept else 0.0) - float(
                np.sum(coef * mid))
            return self._copy(coef_=coef, intercept_=float(icpt), features_=feats,
                              cost_=loss, n_features_in_=p, classes_=self._classes(meta))

        return fit

    def _classes(self, meta: TableMeta) -> tuple[Any, Any]:
        target = self._target_name()
        cats = self.classes or (meta[target].categories if target in meta else None)
        return tuple(cats) if cats is not None else (0, 1)

    def decision_function(self, X: Any) -> np.ndarray:
        """θ'x + intercept."""
        return self._linear(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n × 2)."""
        s = 1 / (1 + np.exp(-self._linear(X)))
        return np.column_stack([1 - s, s])

    def predict(self, X: Any) -> np.ndarray:
        """The predicted classes."""
        pos = self._linear(X) > 0
        neg_label, pos_label = self.classes_
        return np.where(pos, pos_label, neg_label)

    def score(self, X: Any, y: Any) -> float:
        """Accuracy."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


def _same(value: Any, label: Any) -> bool:
    """``value == label`` (or their texts are equal) for one private value; False when
    they cannot be compared."""
    if value is None:
        return False
    try:
        return bool(value == label) or str(value) == str(label)
    except Exception:  # a value that cannot be compared is not the label
        return False


def _newton(Z: np.ndarray, y: np.ndarray, lam: float, b: np.ndarray,
            tol: float = 1e-9, max_iter: int = 100) -> np.ndarray:
    """argmin Σ log(1 + e^(-y θ'z)) + (λ/2)‖θ‖² + b'θ by damped Newton steps (the objective
    is λ-strongly convex); stops when the gradient norm is below ``tol``."""
    d = Z.shape[1]
    theta = np.zeros(d)

    def value(t: np.ndarray) -> float:
        return float(np.logaddexp(0, -y * (Z @ t)).sum() + lam / 2 * t @ t + b @ t)

    for _ in range(max_iter):
        m = y * (Z @ theta)
        s = 0.5 * (1 - np.tanh(m / 2))  # σ(-m)
        grad = Z.T @ (-y * s) + lam * theta + b
        if float(np.linalg.norm(grad)) <= tol:
            break
        w = s * (1 - s)
        hess = (Z * w[:, None]).T @ Z + lam * np.eye(d)
        step = np.linalg.solve(hess, grad)
        f0, t = value(theta), 1.0
        slack = 1e-12 * max(abs(f0), 1.0)  # rounding of f: near the optimum, take full steps
        while t > 1e-12 and value(theta - t * step) > f0 - 0.25 * t * float(grad @ step) \
                + slack:
            t /= 2
        theta = theta - t * step
    return theta
