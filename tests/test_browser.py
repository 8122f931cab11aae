"""notebooks/explore.ipynb in a real browser: JupyterLab on a free loopback port with a
token, headless Chromium (Debian's chromium and chromium-driver, no browser download)
driven by selenium. All cells run against a smoke-trained model; the rendered page must
hold the widgets, the outputs table and the heat map, and typing a sentence in the box
must redraw them. A screenshot is kept: in $FRUIT_BROWSER_ARTIFACTS (`make test-browser`:
build/browser/) or the test's temporary folder; its path is printed.

Slow; skipped with the reason when chromium, chromedriver, selenium or JupyterLab is
missing (`apt-get install chromium chromium-driver`, then `make test-browser`)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab_server import VENV_BIN, free_port, lab_environment, needs_jupyterlab, running

REPO = Path(__file__).resolve().parents[1]
RUN = "results/runs/smoke/question-formation/Tf+Sup/final-0"
TYPED = "my walrus who does sleep doesn't giggle ."
LAB_SETTINGS = {
    # every cell in the DOM, not only those in view (JupyterLab 4 windows long notebooks)
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false"},
}


def needs_browser() -> tuple[str, str]:
    needs_jupyterlab()
    pytest.importorskip("selenium", reason="selenium is not installed: `make test-browser`")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        why = "chromium and chromedriver not found: apt-get install chromium chromium-driver"
        if os.environ.get("FRUIT_BROWSER_REQUIRED") == "1":  # make test-browser: fail, not skip
            pytest.fail(why)
        pytest.skip(why)
    return chromium, driver


def smoke_trained_checkout(home: Path) -> Path:
    """home/notebooks/explore.ipynb (a copy: the browser saves what it runs) and one run
    trained by `fruit train` with the smoke profile under home/results/runs/, where the
    notebook's defaults look."""
    (home / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / "notebooks" / "explore.ipynb", home / "notebooks")
    train = subprocess.run(
        [sys.executable, "-m", "fruit", "train", "--task", "question-formation",
         "--architecture", "Tf+Sup", "--profile", "smoke", "--phase", "final", "--d", "16",
         "--data-dir", "data/smoke", "--generate-data", "--output-dir", "results",
         "--device", "cpu", "--no-progress"],
        cwd=home, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert train.returncode == 0, train.stdout + train.stderr
    assert (home / RUN / "best.pt").is_file()
    return home / RUN


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("FRUIT_BROWSER_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


NOTEBOOK_JS = """
const app = window.jupyterapp;
const panel = app && app.shell.currentWidget;
if (!panel || !panel.context || panel.context.path !== 'notebooks/explore.ipynb') return null;
const cells = panel.content.widgets.filter(c => c.model.type === 'code');
const outputs = cells.flatMap(c => Array.from({length: c.model.outputs.length},
                                               (_, i) => c.model.outputs.get(i).toJSON()));
return {
    status: panel.sessionContext.kernelDisplayStatus,
    kernel: panel.sessionContext.kernelDisplayName,
    executed: cells.every(c => c.model.executionCount !== null),
    errors: outputs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
};
"""


class Page:
    """The JupyterLab page in the browser, as the test reads it."""

    def __init__(self, driver, shots: Path):
        from selenium.webdriver.common.by import By

        self.driver, self.shots, self.by = driver, shots, By

    def state(self) -> dict | None:
        return self.driver.execute_script(NOTEBOOK_JS)

    def wait(self, what: str, condition, timeout: float = 300):
        """Poll ``condition`` until true; else a screenshot (failed.png) and fail."""
        from selenium.common.exceptions import StaleElementReferenceException

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = condition()
            except StaleElementReferenceException:  # an output redrawn while read
                value = None
            if value:
                return value
            time.sleep(0.5)
        self.shot("failed.png")
        raise AssertionError(f"timed out waiting for {what}; see {self.shots / 'failed.png'}")

    def ran(self) -> dict | None:
        """The notebook's state once every cell ran; an error output fails at once."""
        state = self.state()
        if state and state["errors"]:
            self.shot("failed.png")
            raise AssertionError(f"a cell failed: {state['errors']}")
        return state if state and state["executed"] and state["status"] == "idle" else None

    def find(self, css: str) -> list:
        return self.driver.find_elements(self.by.CSS_SELECTOR, css)

    def text(self) -> str:
        return "\n".join(e.text for e in self.find(".jp-Notebook"))

    def heat_maps(self) -> list:
        """Rendered images of outputs wider than 300 pixels (matplotlib's PNG)."""
        return [
            i
            for i in self.find(".jp-OutputArea-output img")
            if self.driver.execute_script("return arguments[0].naturalWidth", i) > 300
        ]

    def execution_counts(self) -> list:
        return self.driver.execute_script(
            "return window.jupyterapp.shell.currentWidget.content.widgets"
            ".map(c => c.model.executionCount)"
        )

    def shot(self, name: str, element=None) -> None:
        if element is not None:
            self.driver.execute_script("arguments[0].scrollIntoView()", element)
        self.driver.save_screenshot(str(self.shots / name))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_explore_notebook_runs_and_redraws_in_jupyterlab(tmp_path):
    chromium, chromedriver = needs_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.select import Select

    times = {}
    mark = time.monotonic()
    home = tmp_path / "home"
    smoke_trained_checkout(home)
    times["train"] = time.monotonic() - mark

    port, token = free_port(), secrets.token_hex(16)
    command = [
        str(VENV_BIN / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={home}", "--LabApp.expose_app_in_browser=True",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]  # fmt: skip
    env = lab_environment(tmp_path / "lab", LAB_SETTINGS)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1500,2600"):  # fmt: skip
        options.add_argument(argument)
    shots = artifacts(tmp_path)

    mark = time.monotonic()
    with running(command, port, env, cwd=home, token=token) as (base, token, _log):
        driver = webdriver.Chrome(service=Service(chromedriver), options=options)
        page = Page(driver, shots)
        try:
            driver.get(f"{base}/lab/tree/notebooks/explore.ipynb?token={token}")
            opened = page.wait("the notebook and its kernel", lambda: (s := page.state()) and s["status"] == "idle" and s)  # fmt: skip
            assert opened["kernel"] in ("Python 3 (ipykernel)", "Python (fruit)")
            times["open"] = time.monotonic() - mark

            mark = time.monotonic()
            driver.execute_script("window.jupyterapp.shell.collapseLeft();")
            driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
            page.wait("all cells to run", page.ran)
            times["run all"] = time.monotonic() - mark

            # the rendered page: the widgets, the outputs tables, the heat map
            page.wait("the rendered outputs", lambda: page.heat_maps() and page.find("table.dataframe"), 60)  # fmt: skip
            tables = [t.text for t in page.find(".jp-OutputArea-output table.dataframe")]
            assert any("p(y | x)" in t for t in tables)  # the beam search
            assert any("hierarchical target" in t and "linear target" in t for t in tables)
            (box,) = page.find(".widget-text input")
            (picker,) = page.find(".widget-dropdown select")
            assert Select(picker).first_selected_option.text == RUN.removeprefix("results/runs/")
            before = page.heat_maps()[0].get_attribute("src")
            page.shot("explore-ran.png", picker)

            # type a sentence and press Enter: every section redraws, no cell runs again
            mark = time.monotonic()
            counts = page.execution_counts()
            box.clear()
            box.send_keys(TYPED, Keys.ENTER)
            page.wait("the redrawn outputs", lambda: f"source: {TYPED} quest" in page.text(), 120)
            page.wait("the redrawn heat map", lambda: (m := page.heat_maps()) and m[0].get_attribute("src") != before, 60)  # fmt: skip
            times["redraw"] = time.monotonic() - mark
            assert "doesn't my walrus who does sleep giggle ?" in page.text()  # its target
            assert page.execution_counts() == counts
            page.shot("explore-typed.png", picker)
            page.shot("explore-typed-heat-map.png", page.heat_maps()[0])
        finally:
            driver.quit()
    print(f"\nscreenshots in {shots}")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
