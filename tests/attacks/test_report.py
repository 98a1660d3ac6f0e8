"""HTML reports of risks and of the composition experiment."""

from __future__ import annotations

import pytest

import statcurator as sc
from statcurator.attacks import experiments as ex
from statcurator.report.attacks import experiment_figures, render_html, write_report

ADULT = sc.datasets.adult()


@pytest.mark.slow
def test_risk_report_with_contrast_and_detail(tmp_path) -> None:
    res = sc.anonymize(sc.datasets.adult(), sc.KAnonymity(10), algorithm="mondrian",
                       qi=["age", "sex", "race"], sensitive=["occupation"])
    risk = sc.attacks.BackgroundKnowledge(b=2).run(res, detail=True, epsilon=1)
    html = write_report(risk, tmp_path / "r.html").read_text()
    assert "background knowledge" in html.lower()
    assert "differentially private counterpart" in html
    assert "Per-target detail (first 200 of 30,162)" in html
    assert html.count("data:image/png;base64,") == 2  # the curve, for the release and for DP


@pytest.mark.slow
def test_experiment_figures_and_page() -> None:
    exp = ex.composition(ADULT, k=[10, 50], algorithms=["optimal"], l=[3], t=[0.4], epsilon=[0.1],
                         seeds=1, overlap=300, workers=1)
    figs = experiment_figures(exp)
    assert set(figs) == {"perfect", "partial", "partial-curves", "values-left", "class-size",
                         "variants"}
    assert all(v[:8] == b"\x89PNG\r\n\x1a\n" for v in figs.values())
    html = render_html(exp)
    assert "Values left and class sizes" in html and "ε=0.2" in html


def test_dynamic_text_is_escaped() -> None:
    r = sc.attacks.Risk("<script>", "knows <b>", 0, 1, 0.0)
    html = render_html(r)
    assert "<script>" not in html and "&lt;script&gt;" in html
