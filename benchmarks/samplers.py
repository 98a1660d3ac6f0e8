"""Sampler throughput: exact secure noise next to numpy's insecure float Laplace.

Measures draws per second of the exact discrete Laplace and discrete Gaussian samplers
(statcurator.mechanisms.samplers, CKS 2020 vectorized over os.urandom) at several scales,
the raw speed of the OS random source they read, and numpy's float Laplace (insecure: a
seeded PCG64 and floating-point arithmetic) as the physical limit; then the per-call
overhead of a mechanism releasing one value. Target: 10^6 exact draws in <= 1 s.

    python benchmarks/samplers.py [--draws 1000000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from statcurator.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    rng,
    samplers,
)

LAPLACE_SCALES = [Fraction(1, 2), Fraction(1), Fraction(10), Fraction(1000),
                  Fraction(204800000)]  # the last: sensitivity 200000 on a 2^-10 grid, ε = 1
GAUSS_SIGMA2 = [Fraction(1), Fraction(100), Fraction(10**6), Fraction(4 * 10**16)]


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def bytes_per_draw(fn: Callable[[int], object], m: int = 200_000) -> float:
    """Secure random bytes a sampler reads per draw (counted at the source)."""
    source = rng._SECURE
    original = source.bytes
    used = [0]

    def counting(k: int) -> bytes:
        used[0] += k
        return original(k)

    source.bytes = counting  # type: ignore[method-assign]
    try:
        fn(m)
    finally:
        del source.bytes
    return used[0] / m


def opendp_comparison(m: int) -> dict[str, float] | None:
    """The vetted alternative, when installed (it is not a dependency): OpenDP's exact
    discrete Laplace / Gaussian (Rust, big-integer arithmetic) through its Python API."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    x = [0] * m
    out: dict[str, float] = {"draws": m}
    lap = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int),
                            scale=10.0)
    gau = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int),
                             scale=10.0)
    one = dp.m.make_laplace(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=2.0)
    out["discrete_laplace_10_draws_per_s"] = m / best(lambda: lap(x), 1)
    out["discrete_gaussian_10_draws_per_s"] = m / best(lambda: gau(x), 1)
    out["laplace_release_scalar_s"] = per_call(lambda: one(42), 500)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    n, rep = args.draws, args.repeat

    from rich.progress import Progress

    results: dict[str, object] = {"draws": n, "cpus": os.cpu_count()}
    tasks = 3 + len(LAPLACE_SCALES) + len(GAUSS_SIGMA2) + 4
    with Progress(transient=True, disable=args.json) as progress:
        bar = progress.add_task("benchmarking samplers", total=tasks)

        def step(label: str, seconds: float) -> float:
            results[label] = seconds
            progress.advance(bar)
            return seconds

        samplers.discrete_laplace(Fraction(10), size=1000)  # warm up imports and tables
        gen = np.random.default_rng(0)
        step("numpy_float_laplace_s", best(lambda: gen.laplace(0, 10, size=n), rep))
        step("os_urandom_8_bytes_per_draw_s", best(lambda: os.urandom(8 * n), rep))
        step("numpy_float_laplace_over_urandom_s",
             best(lambda: np.log(np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
                                 .astype(np.float64) + 1.0), rep))
        for s in LAPLACE_SCALES:
            step(f"discrete_laplace_{s}_s", best(lambda s=s: samplers.discrete_laplace(s, n), rep))
        for s2 in GAUSS_SIGMA2:
            step(f"discrete_gaussian_{s2}_s",
                 best(lambda s2=s2: samplers.discrete_gaussian(s2, n), rep))
        lap = LaplaceMechanism(1, Fraction(1, 2))
        gauss = GaussianMechanism(1, Fraction(1, 8))
        em = ExponentialMechanism(1, 1)
        rr = RandomizedResponse(1)
        step("laplace_release_scalar_s", per_call(lambda: lap.release(42), 2000))
        step("gaussian_release_scalar_s", per_call(lambda: gauss.release(42), 2000))
        step("exponential_release_2_candidates_s", per_call(lambda: em.release([0.5, 0.3]), 500))
        step("randomized_response_scalar_s", per_call(lambda: rr.release(True), 2000))

    results["random_bytes_per_draw"] = {
        "discrete_laplace_10": bytes_per_draw(lambda m: samplers.discrete_laplace(10, m)),
        "discrete_gaussian_100": bytes_per_draw(lambda m: samplers.discrete_gaussian(100, m)),
    }
    results["opendp"] = opendp_comparison(min(n, 200_000))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    limit = results["numpy_float_laplace_s"]
    assert isinstance(limit, float)
    print(f"{n:,} draws per sampler (best of {rep}); {results['cpus']} CPUs\n")
    print(f"{'sampler':44s} {'seconds':>9s} {'draws/s':>12s} {'vs numpy':>9s}  target <= 1 s")
    for key, value in results.items():
        if not key.endswith("_s") or "release" in key or "scalar" in key:
            continue
        assert isinstance(value, float)
        name = key[:-2].replace("_", " ")
        ok = "" if key.startswith(("numpy", "os_")) else ("ok" if value <= 1.0 else "MISSED")
        print(f"{name:44s} {value:9.3f} {n / value:12,.0f} {value / limit:8.1f}x  {ok}")
    print("\nper-call overhead of one release (one scalar, secure noise):")
    for key in ("laplace_release_scalar_s", "gaussian_release_scalar_s",
                "exponential_release_2_candidates_s", "randomized_response_scalar_s"):
        value = results[key]
        assert isinstance(value, float)
        print(f"  {key[:-2].replace('_', ' '):40s} {value * 1e6:9.1f} µs/call")
    per_byte = float(results["os_urandom_8_bytes_per_draw_s"]) / (8 * n)  # type: ignore[arg-type]
    used = results["random_bytes_per_draw"]
    assert isinstance(used, dict)
    print("\nsecure random bytes read per draw, and the share of the run spent reading them:")
    for key, label in (("discrete_laplace_10", "discrete_laplace_10_s"),
                       ("discrete_gaussian_100", "discrete_gaussian_100_s")):
        total = results[label]
        assert isinstance(total, float)
        print(f"  {key.replace('_', ' '):40s} {used[key]:6.1f} B/draw   "
              f"{used[key] * n * per_byte / total:5.0%} of the time")
    od = results["opendp"]
    if isinstance(od, dict):
        ours = n / float(results["discrete_laplace_10_s"])  # type: ignore[arg-type]
        ours_g = n / float(results["discrete_gaussian_100_s"])  # type: ignore[arg-type]
        print(f"\nOpenDP (installed, {od['draws']:,} draws through its Python API):")
        print(f"  discrete laplace scale 10: {od['discrete_laplace_10_draws_per_s']:12,.0f} draws/s"
              f"   (statcurator: {ours:,.0f}, {ours / od['discrete_laplace_10_draws_per_s']:.0f}x)")
        print(f"  discrete gaussian σ=10:    {od['discrete_gaussian_10_draws_per_s']:12,.0f} draws/s"
              f"   (statcurator: {ours_g:,.0f}, "
              f"{ours_g / od['discrete_gaussian_10_draws_per_s']:.0f}x)")
        print(f"  one scalar Laplace release: {od['laplace_release_scalar_s'] * 1e6:9.1f} µs/call")
    else:
        print("\n(OpenDP is not installed: its exact samplers are not compared)")
    print("\nnumpy's float Laplace is the physical limit: no secure bits and no exactness "
          "(its low-order bits leak the input, Mironov 2012).")


if __name__ == "__main__":
    main()
