"""The served page in a real headless browser (Debian's chromium through selenium): the
leaderboard read from the DOM matches the database, a filter changes the rows, and a script in a
system name stays text. A screenshot is kept for people to look at."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from trainclock.report.web import create_app, make_web_server
from trainclock.results.db import open_store, read
from trainclock.results.queries import EntryFilter, list_entries

from .conftest import INJECTED

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SCREENSHOT_COPY = Path("/tmp/trainclock-screenshot.png")
PAGE_TITLE = "trainclock results"

pytestmark = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                reason=f"{CHROMIUM} or {CHROMEDRIVER} is missing: run scripts/install_browser.sh")


@pytest.fixture(scope="module")
def served(injected_db_url):
    """The web page of the store with the injected name, on a free port of 127.0.0.1."""
    with open_store(injected_db_url) as store:
        server = make_web_server(create_app(store), "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}", store
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1400,2200",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # to see what the page's policy blocked
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def leaderboard(driver) -> list[tuple[int, str, str]]:
    """(entry id, system, score) of every leaderboard row, as the browser shows them."""
    from selenium.webdriver.common.by import By

    return [(int(row.get_attribute("data-entry-id")), row.find_element(By.CSS_SELECTOR, "td.system").text,
             row.find_element(By.CSS_SELECTOR, "td.score").text)
            for row in driver.find_elements(By.CSS_SELECTOR, "table.leaderboard tr.entry")]


def expected_rows(store, where: EntryFilter = EntryFilter()) -> list[tuple[int, str, str]]:
    rows = read(store, lambda s: list_entries(s, where), "test")
    return [(r.id, r.system, f"{r.score_minutes:.3f}" if r.score_minutes is not None else "–") for r in rows]


def policy_violations(driver) -> list[str]:
    """What the browser refused under the Content-Security-Policy since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if "Content Security Policy" in entry["message"]]


def test_served_leaderboard_filters_and_escaping(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    base, store = served
    browser.get(base + "/")
    assert browser.title == PAGE_TITLE
    shown = leaderboard(browser)
    assert shown == expected_rows(store)
    assert any(score == "10.940" for _, _, score in shown) and any(score == "311.945" for _, _, score in shown)

    # the script in the system name is shown as text and never ran
    assert INJECTED in [system for _, system, _ in shown]
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    assert browser.title == PAGE_TITLE
    assert browser.find_element(By.ID, "plot-scaling").find_element(By.TAG_NAME, "img").get_attribute("naturalWidth") != "0"

    # the security policy lets the page keep its own style and plots, and the browser refused nothing
    table = browser.find_element(By.CSS_SELECTOR, "table.leaderboard")
    assert table.value_of_css_property("border-collapse") == "collapse"
    assert browser.find_element(By.TAG_NAME, "body").value_of_css_property("max-width") != "none"
    assert policy_violations(browser) == []

    screenshot = tmp_path / "trainclock-served.png"
    assert browser.save_screenshot(str(screenshot))
    shutil.copy(screenshot, SCREENSHOT_COPY)

    # a filter chosen in the form changes the rows to the database's filtered ones
    Select(browser.find_element(By.ID, "filter-round")).select_by_value("3.0")
    browser.find_element(By.ID, "filter-apply").click()
    WebDriverWait(browser, 20).until(lambda d: "round=3.0" in d.current_url)
    filtered = leaderboard(browser)
    assert filtered == expected_rows(store, EntryFilter(round="3.0"))
    assert 0 < len(filtered) < len(shown)
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    assert policy_violations(browser) == []  # the form may submit to its own server


def test_the_policy_blocks_what_the_page_did_not_bring(served, browser):
    """The headers arrive in the browser: a script or style added to the page does not run."""
    import urllib.request

    base, _ = served
    with urllib.request.urlopen(base + "/") as response:
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    browser.get(base + "/")
    policy_violations(browser)
    browser.execute_script("""
        const script = document.createElement('script'); script.textContent = 'window.pwned = 1';
        document.body.appendChild(script);
        const style = document.createElement('style'); style.textContent = 'body { color: rgb(1, 2, 3); }';
        document.head.appendChild(style);""")
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    assert browser.execute_script("return getComputedStyle(document.body).color") != "rgb(1, 2, 3)"
    assert policy_violations(browser)
