"""`statcurator mechanisms`: list, describe (tables and --json), plot, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statcurator.cli import app

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["mechanisms", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_lists_the_mechanisms() -> None:
    names = [m["name"] for m in run_json()["mechanisms"]]
    assert {"laplace", "gaussian", "exponential", "randomized-response",
            "partition-selection", "sparse-vector"} <= set(names)
    table = runner.invoke(app, ["mechanisms"])
    assert table.exit_code == 0 and "laplace" in table.stdout


def test_describes_laplace() -> None:
    d = run_json("laplace", "--epsilon", "0.5", "--sensitivity", "1")
    assert d["scale"] == 2.0 and d["halfwidth"] == 6.0 and d["cost"] == "ε=0.5"
    assert d["cost_exact"] == {"epsilon": "1/2"}
    grid = run_json("laplace", "--epsilon", "1", "--sensitivity", "200000", "--grid", "1/1024")
    assert grid["scale"] == 200000.0
    text = runner.invoke(app, ["mechanisms", "laplace", "--epsilon", "0.1"])
    assert text.exit_code == 0 and "halfwidth" in text.stdout


def test_randomized_response_truthful_probability() -> None:
    assert round(run_json("randomized-response", "--epsilon", "0.1")["p_truthful"], 3) == 0.525
    assert round(run_json("rr", "--epsilon", "0.01")["p_truthful"], 3) == 0.502
    assert run_json("rr", "--epsilon", "1", "-k", "4")["categories"] == 4


def test_gaussian_from_rho_or_epsilon_delta() -> None:
    d = run_json("gaussian", "--rho", "0.5", "--delta", "1e-6")
    assert d["cost"] == "ρ=0.5" and 5.2 < d["epsilon_at_delta"] < 5.3
    e = run_json("gaussian", "--epsilon", "1", "--delta", "1e-6")
    assert e["epsilon_at_delta"] <= 1.0


@pytest.mark.parametrize("name,extra", [("exponential", []), ("report-noisy-max", []),
                                        ("sparse-vector", ["--threshold", "10"]),
                                        ("vector-laplace", ["--sensitivity", "2"]),
                                        ("geometric", []),
                                        ("partition-selection", ["--delta", "1e-6"])])
def test_describes_every_mechanism(name: str, extra: list[str]) -> None:
    d = run_json(name, "--epsilon", "1", *extra)
    assert d["mechanism"] == name and d["cost"].startswith("ε=1")


def test_plots_the_noise(tmp_path: Path) -> None:
    for name, args in [("laplace", ["--epsilon", "0.5"]), ("gaussian", ["--rho", "0.125"]),
                       ("rr", ["--epsilon", "1"]),
                       ("partition-selection", ["--epsilon", "1", "--delta", "1e-6"])]:
        out = tmp_path / f"{name}.png"
        d = run_json(name, *args, "--plot", str(out))
        assert d["plot"] == str(out)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(app, ["mechanisms", "exponential", "--epsilon", "1", "--plot",
                              str(tmp_path / "em.png")])
    assert bad.exit_code == 2 and "no noise distribution" in bad.output


@pytest.mark.parametrize("args,message", [
    (["laplace"], "needs --epsilon"),
    (["laplace", "--epsilon", "0"], "must be > 0"),
    (["laplace", "--epsilon", "nan"], "not a number"),
    (["laplace", "--epsilon", "1", "--alpha", "1"], "alpha"),
    (["gaussian"], "needs --rho"),
    (["partition-selection", "--epsilon", "1"], "needs --delta"),
    (["cauchy", "--epsilon", "1"], "unknown mechanism"),
    (["laplace", "--epsilon", "1", "--plot", "noise.gif"], "end the file name in one of .png"),
    (["laplace", "--epsilon", "1", "--plot", "/proc/noise.png"], "cannot write --plot"),
    (["sparse-vector", "--epsilon", "1", "--threshold", "ten"], "threshold is not a number"),
])
def test_errors_are_one_line_with_a_remedy(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["mechanisms", *args])
    assert result.exit_code == 2
    assert message in result.output
    as_json = runner.invoke(app, ["mechanisms", *args, "--json"])
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["remedy"]
