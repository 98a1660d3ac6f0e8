"""The web console in a real headless Chromium (Debian's, driven by Playwright), against a
real ``statcurator serve`` process. Screenshots are kept as test artifacts in a temporary
folder (or ``$STATCURATOR_SCREENSHOTS``); their paths are printed.

Playwright cannot download its own browser here, so it drives /usr/bin/chromium, which
scripts/setup-system.sh installs; without it these tests are skipped, naming the script.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import start_server, write_config

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is missing: pip install -e '.[dev]'")
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed: run scripts/setup-system.sh")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("console")
    with start_server(write_config(folder / "curator.toml", "sqlite")) as s:
        yield s


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    target = os.environ.get("STATCURATOR_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shot(page, shots: Path, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def test_an_analyst_session_and_the_curator_view(browser, server, shots: Path) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url)
    _shot(page, shots, "01-sign-in")
    page.fill("#token", "sct_not-a-token")
    page.click("#signin-form button")
    page.wait_for_selector("#signin-error:has-text('not valid')")

    page.fill("#token", server.admin_token)
    page.click("#signin-form button")
    page.wait_for_selector("#schema tr >> nth=9")  # header + nine declared columns
    assert "admin (admin)" in page.inner_text("#who")
    assert "[0, 120]" in page.inner_text("#schema")

    # the form writes the SQL; the dry run shows cost, accuracy and what is left
    page.select_option("#agg", "count")
    page.select_option("#groupby", "race")
    page.click("#build")
    assert page.input_value("#sql") == "SELECT race, COUNT(*) AS n FROM adult GROUP BY race"
    page.fill("#epsilon", "0.5")
    page.click("#dryrun")
    page.wait_for_selector("#accuracy")
    assert "Cost ε=0.5" in page.inner_text("#estimate")
    assert "±6" in page.inner_text("#accuracy") or "6" in page.inner_text("#accuracy")
    before = page.get_attribute("#gauge .gauge-fg", "data-share")

    page.click("#run")
    page.wait_for_selector("#answer tr >> nth=5")  # header + five races
    assert "interval" in page.inner_text("#answer")
    assert page.locator("#chart rect.bar").count() == 5
    assert page.locator("#chart line.whisker").count() == 15
    after = page.get_attribute("#gauge .gauge-fg", "data-share")
    assert float(after) == pytest.approx(0.5) and float(before) == pytest.approx(1.0)
    _shot(page, shots, "02-answer-with-intervals")

    # a median, with its interval, through the SQL box
    page.fill("#sql", "SELECT sex, MEDIAN(age) AS m FROM adult GROUP BY sex")
    page.fill("#epsilon", "0.25")
    page.click("#run")
    page.wait_for_selector("#answer th:has-text('m interval')")

    page.click("[data-tab=history]")
    page.wait_for_selector("#history tr >> nth=2")
    assert "GROUP BY race" in page.inner_text("#history")
    page.locator("#history button").nth(1).click()  # the older one: the race counts
    page.wait_for_selector("#answer-meta:has-text('no new cost')")
    _shot(page, shots, "03-history")

    # the curator's view: datasets, analysts, a grant, an anonymization with its report
    page.click("#admin-tab")
    page.wait_for_selector("#admin-datasets tr >> nth=1")
    page.fill("#new-analyst", "Carol")
    page.click("#analyst-form button")
    page.wait_for_selector("#new-token:has-text('sct_')")
    token = re.search(r"sct_[A-Za-z0-9_-]+", page.inner_text("#new-token")).group(0)
    page.wait_for_selector("#admin-analysts td:has-text('carol')")
    # revoke an analyst (after the confirmation dialog), then give it a new token
    page.once("dialog", lambda dialog: dialog.accept())
    page.select_option("#access-analyst", "carol")
    page.click("#access-form button[value=revoke]")
    page.wait_for_selector("#new-token:has-text('carol is revoked')")
    page.wait_for_selector("#admin-analysts tr:has-text('carol') td:has-text('revoked')")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(  # noqa: S310 - the test's own server
            server.url.rstrip("/") + "/v1/me", headers={"Authorization": f"Bearer {token}"}), timeout=30)
    assert refused.value.code == 401
    page.once("dialog", lambda dialog: dialog.accept())
    page.select_option("#access-analyst", "carol")
    page.click("#access-form button[value=rotate]")
    page.wait_for_selector("#new-token:has-text('New token of carol')")
    token = re.search(r"sct_[A-Za-z0-9_-]+", page.inner_text("#new-token")).group(0)
    page.fill("#anon-k", "10")
    page.fill("#anon-qi", "age, sex, race")
    page.click("#anon-form button")
    page.wait_for_selector("#anon-report td:has-text('verified independently')", timeout=60_000)
    assert "10-anonymity" in page.inner_text("#anon-report")
    _shot(page, shots, "04-curator-anonymize")
    assert not errors, errors
    page.close()

    # the new analyst sees no curator tab and only their own (empty) history
    other = browser.new_page()
    other.goto(server.url)
    other.fill("#token", token)
    other.click("#signin-form button")
    other.wait_for_selector("#schema tr >> nth=1")
    assert other.is_hidden("#admin-tab")
    assert other.text_content("#gauge text") == "1 / 1"
    other.click("[data-tab=history]")
    other.wait_for_selector("#history tr")
    assert "GROUP BY race" not in other.inner_text("#history")
    _shot(other, shots, "05-analyst-view")
    other.close()

    # a second admin revoking itself in the console is signed out (the first one stays)
    base = server.url.rstrip("/")
    created = urllib.request.Request(  # noqa: S310 - the test's own server
        base + "/v1/admin/analysts", data=json.dumps({"name": "root", "role": "admin"}).encode(),
        headers={"Authorization": f"Bearer {server.admin_token}",
                 "Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(created, timeout=30) as r:  # noqa: S310
        root = json.loads(r.read())["token"]
    me = browser.new_page()
    me.goto(server.url)
    me.fill("#token", root)
    me.click("#signin-form button")
    me.click("#admin-tab")
    me.wait_for_selector("#admin-analysts td:has-text('root')")
    me.once("dialog", lambda dialog: dialog.accept())
    me.select_option("#access-analyst", "root")
    me.click("#access-form button[value=revoke]")
    me.wait_for_selector("#signin-form", state="visible")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(  # noqa: S310
            base + "/v1/me", headers={"Authorization": f"Bearer {root}"}), timeout=30)
    assert refused.value.code == 401
    me.close()


def test_the_api_docs_render_swagger_ui_offline_and_try_it_out_works(
        browser, server, shots: Path) -> None:
    # an air-gapped network: every request that leaves the server's origin is aborted (and
    # recorded); Swagger UI comes from the server itself, so the page renders all the same
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text)
            if "Content Security Policy" in m.text else None)  # a violation is an error too
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    outside: list[str] = []

    def offline(route) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(server.url + "docs")
    page.wait_for_selector(".opblock >> nth=5")
    assert "statcurator" in page.inner_text(".info .title")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/v1/queries", "/v1/datasets", "/v1/me"} <= {t.strip() for t in paths}
    assert page.locator("#docs-offline").count() == 0

    # Authorize with a bearer token, then "Try it out" on GET /v1/me: the API answers, under
    # the page's CSP (connect-src 'self')
    page.click(".auth-wrapper .authorize")
    page.fill(".modal-ux input", server.admin_token)
    page.click(".modal-ux .auth-btn-wrapper .authorize")
    page.click(".modal-ux .btn-done")
    page.click("#operations-analyst-me_v1_me_get .opblock-summary")
    page.click("#operations-analyst-me_v1_me_get .try-out__btn")
    page.click("#operations-analyst-me_v1_me_get .execute")
    page.wait_for_selector("#operations-analyst-me_v1_me_get .live-responses-table "
                           ".response-col_status:has-text('200')")
    body = page.inner_text("#operations-analyst-me_v1_me_get .live-responses-table "
                           ".response .response-col_description")
    assert '"analyst": "admin"' in body and '"role": "admin"' in body
    _shot(page, shots, "09-docs-offline-swagger-ui")
    assert errors == []
    assert outside == [] and all(u.startswith(server.url) for u in requested), requested
    assert server.url + "docs/swagger-ui-bundle.js" in requested
    page.close()


def test_the_api_docs_say_what_is_wrong_when_swagger_ui_is_not_installed(
        browser, tmp_path: Path, shots: Path) -> None:
    # control: a broken install, where the package with Swagger UI's files has no files (a
    # fastapi_offline without its static folder shadows the real one); the server answers 404
    # for them and /docs says what is wrong, what to do, and where the schema is
    shadow = tmp_path / "shadow" / "fastapi_offline"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    with start_server(write_config(tmp_path / "curator.toml", "sqlite"),
                      env={"PYTHONPATH": path}) as broken:
        page = browser.new_page(viewport={"width": 1200, "height": 600})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        statuses: dict[str, int] = {}
        page.on("response", lambda r: statuses.__setitem__(r.url, r.status))
        page.goto(broken.url + "docs")
        page.wait_for_selector("#docs-offline")
        text = page.inner_text("#docs-offline")
        assert "could not load" in text and "fastapi-offline" in text
        assert "reinstall statcurator" in text and "/openapi.json" in text
        assert page.get_attribute("#docs-offline a", "href") == "/openapi.json"
        assert statuses[broken.url + "docs"] == 200
        assert statuses[broken.url + "docs/swagger-ui-bundle.js"] == 404
        _shot(page, shots, "10-docs-swagger-ui-missing")
        assert errors == []  # the page's own script ran under its CSP without an error
        page.close()
