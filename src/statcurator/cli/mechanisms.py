"""``statcurator mechanisms``: describe a DP mechanism and plot its noise distribution.

``statcurator mechanisms`` lists the mechanisms; ``statcurator mechanisms laplace --epsilon
0.5`` describes one (noise scale, the half-width of its (1-α) interval, the probability of the
truthful answer for randomized response, the privacy cost) and ``--plot noise.png`` draws the
exact distribution of its noise.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer

from ..core.errors import InvalidParameterError
from ._common import (
    JSON_OPTION,
    emit,
    exact_option,
    handle_errors,
    output_path,
    print_json,
    print_table,
    writing,
)

_SUMMARIES = {
    "laplace": "Laplace noise (exact discrete Laplace) on a value of sensitivity Δ: ε-DP",
    "geometric": "two-sided geometric noise on an integer query: ε-DP",
    "vector-laplace": "Laplace noise on a vector (histogram) of L1 sensitivity Δ: ε-DP",
    "gaussian": "discrete Gaussian noise, L2 sensitivity Δ: ρ-zCDP (→ (ε, δ)-DP)",
    "vector-gaussian": "discrete Gaussian noise on an integer vector of L2 sensitivity Δ",
    "exponential": "selection ∝ exp(ε·score/(2Δ)): ε-DP (exact sampling)",
    "report-noisy-max": "arg-max of Laplace-noised scores: ε-DP",
    "sparse-vector": "AboveThreshold: the first query above a threshold, ε-DP in total",
    "randomized-response": "each person answers truthfully w.p. e^ε/(e^ε + k - 1): local ε-DP",
    "partition-selection": "keep group keys whose noisy unit count reaches τ: (ε, δ)-DP",
}


def _build(name: str, epsilon: Fraction | None, sensitivity: Fraction, delta: Fraction | None,
           rho: Fraction | None, grid: Fraction | None, categories: int,
           max_partitions: int, threshold: Fraction) -> Any:
    from .. import mechanisms as mech

    def need_epsilon() -> Fraction:
        if epsilon is None:
            raise InvalidParameterError(f"the {name} mechanism needs --epsilon",
                                        remedy=f"run: statcurator mechanisms {name} --epsilon 1")
        return epsilon

    if name in ("gaussian", "vector-gaussian"):
        cls = mech.GaussianMechanism if name == "gaussian" else mech.VectorGaussianMechanism
        if rho is not None:
            return cls(sensitivity, rho, grid)
        if epsilon is None or delta is None:
            raise InvalidParameterError("the Gaussian mechanism needs --rho, or --epsilon and --delta",
                                        remedy="run: statcurator mechanisms gaussian --rho 0.125 "
                                               "(or --epsilon 1 --delta 1e-6)")
        g = mech.GaussianMechanism.from_epsilon_delta(sensitivity, epsilon, delta, grid)
        return cls(sensitivity, g.rho, grid)
    eps = need_epsilon()
    if name == "laplace":
        return mech.LaplaceMechanism(sensitivity, eps, grid)
    if name == "geometric":
        return mech.GeometricMechanism(sensitivity, eps)
    if name == "vector-laplace":
        return mech.VectorLaplaceMechanism(sensitivity, eps, grid)
    if name == "exponential":
        return mech.ExponentialMechanism(eps, sensitivity)
    if name == "report-noisy-max":
        return mech.ReportNoisyMax(eps, sensitivity, grid=grid)
    if name == "sparse-vector":
        return mech.SparseVector(eps, sensitivity, threshold, grid=grid)
    if name == "randomized-response":
        return mech.RandomizedResponse(eps, categories)
    if name == "partition-selection":
        if delta is None:
            raise InvalidParameterError("partition selection needs --delta",
                                        remedy="run: statcurator mechanisms partition-selection "
                                               "--epsilon 1 --delta 1e-6")
        return mech.PartitionSelection(eps, delta, max_partitions)
    raise InvalidParameterError(f"unknown mechanism {name!r}",  # pragma: no cover - checked
                                remedy="run statcurator mechanisms to list them")


def describe(m: Any, alpha: Fraction, delta: Fraction | None) -> dict[str, Any]:
    """The facts a person asks about a mechanism, as a JSON-ready dict (exact strings too).

    >>> from statcurator.mechanisms import LaplaceMechanism
    >>> d = describe(LaplaceMechanism(1, Fraction(1, 2)), Fraction(1, 20), None)
    >>> d["scale"], d["halfwidth"], d["cost"]
    (2.0, 6.0, 'ε=0.5')
    """
    from .. import mechanisms as mech

    out: dict[str, Any] = {"mechanism": m.name, "summary": _SUMMARIES[m.name],
                           "cost": str(m.cost), "cost_exact": _exact_cost(m.cost)}
    level = f"{float(1 - alpha):.4g}"
    if isinstance(m, mech.RandomizedResponse):
        out.update(epsilon=m.epsilon, categories=m.k, p_truthful=m.p_truthful,
                   p_each_other=m.p_other)
        return out
    if isinstance(m, mech.PartitionSelection):
        out.update(epsilon=m.epsilon, delta=m.delta, max_partitions=m.max_partitions,
                   noise_scale=m.noise_scale, threshold=m.threshold,
                   p_keep_one_unit=m.keep_probability(1),
                   halfwidth=m.accuracy(alpha), confidence=level)
        return out
    if isinstance(m, mech.ExponentialMechanism):
        out.update(epsilon=m.epsilon, sensitivity=m.sensitivity, coefficient=m.coefficient,
                   score_gap_2_candidates=m.accuracy(alpha, 2), confidence=level)
        return out
    if isinstance(m, mech.ReportNoisyMax):
        out.update(epsilon=m.epsilon, sensitivity=m.sensitivity, noise_scale=m.noise_scale)
        return out
    if isinstance(m, mech.SparseVector):
        out.update(epsilon=m.epsilon, sensitivity=m.sensitivity, threshold=m.threshold,
                   threshold_noise_scale=m.threshold_scale, query_noise_scale=m.query_scale,
                   halfwidth=m.accuracy(alpha), confidence=level)
        return out
    out.update(sensitivity=m.sensitivity, grid=m.grid, scale=float(m.scale),
               scale_exact=str(m.scale), noise_std=m.noise_std,
               halfwidth=m.accuracy(alpha), confidence=level,
               interval=f"value ± {m.accuracy(alpha):g} with probability >= {level}")
    if isinstance(m, mech.GaussianMechanism):
        out.update(rho=m.rho, sigma2_grid_units=str(m.sigma2))
        if delta is not None and delta > 0:
            approx = m.to_approx(delta)
            out.update(epsilon_at_delta=approx.epsilon, delta=delta)
    else:
        out.update(epsilon=m.epsilon)
    return out


def _exact_cost(loss: Any) -> dict[str, str]:
    import dataclasses

    return {f.name: str(getattr(loss, f.name)) for f in dataclasses.fields(loss)}


def register(app: typer.Typer) -> None:
    """Add the ``mechanisms`` command to the CLI app."""

    @app.command("mechanisms")
    @handle_errors
    def mechanisms_command(
        name: str = typer.Argument(None, help="The mechanism to describe; omit to list them."),
        epsilon: str = typer.Option(None, "--epsilon", "-e", help="Privacy parameter ε."),
        sensitivity: str = typer.Option("1", "--sensitivity", "-s",
                                        help="Sensitivity Δ (L1; L2 for the Gaussian)."),
        delta: str = typer.Option(None, "--delta", "-d",
                                  help="δ: for partition selection, or to convert ρ to (ε, δ)."),
        rho: str = typer.Option(None, "--rho", help="ρ (zCDP) for the Gaussian mechanism."),
        alpha: str = typer.Option("0.05", "--alpha", "-a",
                                  help="Error rate of the interval (0.05: a 95% interval)."),
        grid: str = typer.Option(None, "--grid", help="Output grid step (e.g. 1/1024)."),
        categories: int = typer.Option(2, "--categories", "-k",
                                       help="Categories of randomized response."),
        max_partitions: int = typer.Option(1, "--max-partitions",
                                           help="Keys one unit may touch (partition selection)."),
        threshold: str = typer.Option("0", "--threshold", help="Threshold of sparse vector."),
        plot_path: Annotated[Path | None, typer.Option(
            "--plot", help="Write the noise distribution to a PNG (or .svg, .pdf).")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Describe a DP mechanism (scale, interval, cost) and plot its noise distribution."""
        if name is None:
            rows = [{"name": k, "summary": v} for k, v in _SUMMARIES.items()]
            if json_output:
                print_json({"mechanisms": rows})
                return
            print_table(("mechanism", "what it does"),
                        [(r["name"], r["summary"]) for r in rows],
                        title="differential-privacy mechanisms")
            emit("describe one with: statcurator mechanisms NAME --epsilon 1")
            return
        key = name.strip().lower().replace("_", "-")
        aliases = {"rr": "randomized-response", "em": "exponential", "svt": "sparse-vector",
                   "above-threshold": "sparse-vector", "rnm": "report-noisy-max",
                   "histogram": "vector-laplace", "partitions": "partition-selection"}
        key = aliases.get(key, key)
        if key not in _SUMMARIES:
            raise InvalidParameterError(f"unknown mechanism {name!r}",
                                        remedy="choose one of: " + ", ".join(_SUMMARIES))
        plot_path = output_path(plot_path, "--plot", (".png", ".svg", ".pdf"))
        a = exact_option(alpha, "alpha")
        assert a is not None
        if not a < 1:
            raise InvalidParameterError(f"alpha must be < 1, got {alpha}",
                                        remedy="pass --alpha 0.05 for a 95% interval")
        d = exact_option(delta, "delta", allow_zero=True)
        m = _build(key, exact_option(epsilon, "epsilon"), exact_option(sensitivity, "sensitivity"),
                   d, exact_option(rho, "rho"), exact_option(grid, "grid"), categories,
                   max_partitions, exact_option(threshold, "threshold", positive=False)
                   or Fraction(0))
        info = describe(m, a, d)
        if plot_path is not None:
            from ..report.plots import noise_distribution

            out = plot_path
            info["plot"] = str(writing(out, "--plot", lambda: noise_distribution(m, out, a)))
        if json_output:
            print_json(info)
            return
        print_table(("property", "value"),
                    [(k.replace("_", " "), _show(v)) for k, v in info.items()
                     if k not in ("mechanism", "summary", "cost_exact")],
                    title=f"{key}: {_SUMMARIES[key]}", show_header=False)


def _show(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{float(v):.6g} ({v})"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
