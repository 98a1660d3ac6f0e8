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
from ._common import JSON_OPTION, console, exact_option, handle_errors, print_json

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
    return {k: str(v) for k, v in zip(type(loss).__dataclass_fields__, loss._components(),
                                      strict=True)}


def plot(m: Any, path: Path, alpha: Fraction) -> None:
    """Draw the exact noise distribution (or the answer distribution) of ``m`` to a PNG.

    >>> import tempfile
    >>> from statcurator.mechanisms import LaplaceMechanism
    >>> out = Path(tempfile.mkdtemp()) / "noise.png"
    >>> plot(LaplaceMechanism(1, 1), out, Fraction(1, 20))
    >>> out.read_bytes()[:4]
    b'\x89PNG'
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .. import mechanisms as mech

    fig, ax = plt.subplots(figsize=(7, 4))
    if isinstance(m, mech.RandomizedResponse):
        probs = [m.p_truthful] + [m.p_other] * (m.k - 1)
        ax.bar(["true answer"] + [f"other {i}" for i in range(1, m.k)], probs, color="#4c72b0")
        ax.set_ylabel("probability of the report")
        ax.set_title(f"randomized response, ε={float(m.epsilon):g}: "
                     f"P(truthful) = {m.p_truthful:.4f}")
    elif isinstance(m, mech.PartitionSelection):
        counts = np.arange(0, 2 * m.threshold + 1)
        ax.plot(counts, [m.keep_probability(int(c)) for c in counts], marker="o", ms=3)
        ax.axvline(m.threshold, color="grey", ls="--", label=f"threshold τ = {m.threshold}")
        ax.set_xlabel("true number of privacy units in the key")
        ax.set_ylabel("P(key is released)")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title(f"partition selection, {m.cost}")
    elif hasattr(m, "noise_pmf"):
        h = int(m.accuracy(Fraction(1, 10**4)) / float(m.step)) + 1
        step = max(1, h // 400)
        ks = np.arange(-h, h + 1, step)
        xs = ks * float(m.step)
        ax.vlines(xs, 0, m.noise_pmf(ks), color="#4c72b0", lw=max(0.5, 300 / len(ks)))
        half = m.accuracy(alpha)
        ax.axvspan(-half, half, color="#dd8452", alpha=0.15,
                   label=f"{float(1 - alpha):.3g} interval: ±{half:g}")
        ax.set_xlabel("noise (output units)")
        ax.set_ylabel("P(noise = x)")
        ax.legend()
        ax.set_title(f"{m.name}: scale {float(m.scale):g}, cost {m.cost}")
    else:
        plt.close(fig)
        raise InvalidParameterError(f"the {m.name} mechanism has no noise distribution to plot",
                                    remedy="plot laplace, geometric, gaussian, vector-laplace, "
                                           "randomized-response or partition-selection")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
            "--plot", help="Write the noise distribution to a PNG.")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Describe a DP mechanism (scale, interval, cost) and plot its noise distribution."""
        if name is None:
            rows = [{"name": k, "summary": v} for k, v in _SUMMARIES.items()]
            if json_output:
                print_json({"mechanisms": rows})
                return
            from rich.table import Table

            t = Table("mechanism", "what it does", title="differential-privacy mechanisms")
            for r in rows:
                t.add_row(r["name"], r["summary"])
            console().print(t)
            console().print("describe one with: statcurator mechanisms NAME --epsilon 1")
            return
        key = name.strip().lower().replace("_", "-")
        aliases = {"rr": "randomized-response", "em": "exponential", "svt": "sparse-vector",
                   "above-threshold": "sparse-vector", "rnm": "report-noisy-max",
                   "histogram": "vector-laplace", "partitions": "partition-selection"}
        key = aliases.get(key, key)
        if key not in _SUMMARIES:
            raise InvalidParameterError(f"unknown mechanism {name!r}",
                                        remedy="choose one of: " + ", ".join(_SUMMARIES))
        a = exact_option(alpha, "alpha")
        assert a is not None
        if not a < 1:
            raise InvalidParameterError(f"alpha must be < 1, got {alpha}",
                                        remedy="pass --alpha 0.05 for a 95% interval")
        d = exact_option(delta, "delta", allow_zero=True)
        m = _build(key, exact_option(epsilon, "epsilon"), exact_option(sensitivity, "sensitivity"),
                   d, exact_option(rho, "rho"), exact_option(grid, "grid"), categories,
                   max_partitions, Fraction(threshold) if threshold else Fraction(0))
        info = describe(m, a, d)
        if plot_path is not None:
            plot(m, plot_path, a)
            info["plot"] = str(plot_path)
        if json_output:
            print_json(info)
            return
        from rich.table import Table

        t = Table("property", "value", title=f"{key}: {_SUMMARIES[key]}", show_header=False)
        for k, v in info.items():
            if k in ("mechanism", "summary", "cost_exact"):
                continue
            t.add_row(k.replace("_", " "), _show(v))
        console().print(t)


def _show(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{float(v):.6g} ({v})"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
