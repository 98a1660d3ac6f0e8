"""The HTML report."""

from __future__ import annotations

import base64
import re

from statcurator.anonymize import KAnonymity, LDiversity, anonymize
from statcurator.report.anonymization import limitations, render_html, write_report


def test_report_contents(adult, tmp_path):
    res = anonymize(adult, KAnonymity(5), suppression=0.02)
    path = write_report(res, tmp_path / "r.html")
    html = path.read_text()
    for text in ("Chosen generalization", "Utility", "Re-identification risk", "Verification",
                 "5-anonymity", "holds", "homogeneity"):
        assert text in html
    png = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html).group(1)
    assert base64.b64decode(png)[:4] == b"\x89PNG"
    for q in res.qi:
        assert f"<td>{q}</td>" in html


def test_report_of_mondrian_and_l_diversity(adult):
    res = anonymize(adult, KAnonymity(5), LDiversity("occupation", 2), algorithm="mondrian",
                    sensitive="occupation", qi="sex,age,race")
    html = render_html(res, title="Mondrian")
    assert "Mondrian partitioned" in html and "similarity" in " ".join(limitations(res))
