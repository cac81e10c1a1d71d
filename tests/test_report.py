"""`ownership report`: one self-contained HTML file, checked structurally and in a headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS
from ownership.cli import app

V21 = SPECS / "sglang_disagg_v0_5_19.py"
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "chrome-headless-shell")


class _Page(HTMLParser):
    """Collects tags (with attributes and nesting) and text by element class."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None], tuple[str, ...]]] = []
        self.stack: list[str] = []
        self.classes: list[str] = []
        self.text_by_class: dict[str, list[str]] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a, tuple(self.classes)))
        if tag in ("br", "meta", "img", "link", "input", "hr"):
            return
        self.stack.append(tag)
        self.classes.append(a.get("class") or "")

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            open_tag = self.stack.pop()
            self.classes.pop()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for cls in set(self.classes):
            for c in cls.split():
                self.text_by_class.setdefault(c, []).append(data)


def _report(tmp_path: Path, *args: str) -> tuple[str, str]:
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", *args, "--out", str(out)])
    assert out.exists(), res.output
    return out.read_text(encoding="utf-8"), res.output


def _parse(doc: str) -> _Page:
    page = _Page()
    page.feed(doc)
    return page


def _line_of(path: Path, text: str) -> int:
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if text in line:
            return n
    raise AssertionError(text)


@pytest.fixture(scope="module")
def v21_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    old = Path.cwd()
    os.chdir(ROOT)
    try:
        return _report(
            tmp_path_factory.mktemp("report"), "specs/sglang_disagg_v0_5_19.py", "specs/sglang_disagg_v0_5_21.py"
        )
    finally:
        os.chdir(old)


def test_report_is_self_contained_and_complete(v21_report: tuple[str, str]) -> None:
    doc, output = v21_report
    page = _parse(doc)
    assert "wrote" in output
    # Nothing is fetched: no external script, stylesheet, image or font.
    for tag, attrs, _ in page.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        if tag == "script":
            assert "src" not in attrs
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", doc)
    assert "@import" not in doc and "url(" not in doc
    # One inline picture, inside the figure of the violating spec.
    svgs = [cls for tag, _, cls in page.tags if tag == "svg"]
    assert len(svgs) == 1 and any("figure" in c for c in svgs[0])
    headline = " ".join("".join(page.text_by_class["violation-headline"]).split())
    assert headline == "VIOLATED no_foreign_read in sglang_disagg_v0_5_19 (explore)"
    text = " ".join("".join(page.text).split())
    assert "B reads D0, which holds A's KV" in text
    # Summary and source reference of both specs, parameters, verdict badges.
    for needle in (
        "SGLang 0.5.4.post2-0.5.19 PD disaggregation: rejected prompt admitted by decode reads stale KV",
        "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, _pre_alloc, pop_transferred",
        "sglang PR #38935",
        "prefill_pool_tokens",
        "found a violation after",
        "all reachable states of this instance checked",
    ):
        assert needle in text, needle
    badges = [a.get("class") for tag, a, _ in page.tags if tag == "span" and "badge" in (a.get("class") or "")]
    assert "badge VIOLATED" in badges and "badge PROVED" in badges
    # Step table: 15 steps after the initial state.
    assert "decode_forward(B)" in text and "(initial state)" in text
    # Spec source of the actions taken, with their real line numbers.
    n = _line_of(V21, "def decode_pop_preallocated")
    assert re.search(rf'<td class="ln">{n}</td><td>def decode_pop_preallocated\(s, r: ReqId\):', doc)
    # Reproduce command and the diagnosis.
    assert "ownership check specs/sglang_disagg_v0_5_19.py" in text
    assert "every path to no_foreign_read passes through: decode_pop_preallocated(r)" in text
    assert "p_to_finish[r] = yes" in text and "kv_tokens[r] &lt; d_input_len[r]" in doc


def test_report_runs_every_engine_asked_for(tmp_path: Path) -> None:
    doc, output = _report(tmp_path, str(CORPUS / "toy_double_free.py"), "--engine", "explore", "--engine", "bmc")
    assert "explore VIOLATED, bmc VIOLATED" in output
    page = _parse(doc)
    headlines = [" ".join(t.split()) for t in page.text_by_class["violation-headline"]]
    assert [h for h in headlines if h] == [
        "VIOLATED no_double_ownership in toy_double_free (explore)",
        "VIOLATED no_double_ownership in toy_double_free (bmc)",
    ]
    assert sum(1 for tag, _, _ in page.tags if tag == "svg") == 2
    assert "--engine bmc" in doc


def test_report_refuses_an_unknown_engine(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(V21), "--engine", "nope", "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "error[OWN013]" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r.html").exists()


def _chromium() -> str | None:
    env = os.environ.get("OWNERSHIP_CHROMIUM")
    if env:
        return env
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


# Measures what the browser actually laid out and leaves it in the DOM for --dump-dom.
_PROBE = """<script>
(function () {
  var svg = document.querySelector('.figure svg');
  var head = document.querySelector('.violation-headline');
  var b = document.body;
  if (svg) { var r = svg.getBoundingClientRect(); b.dataset.svgWidth = r.width; b.dataset.svgHeight = r.height; }
  if (head) { var h = head.getBoundingClientRect(); b.dataset.headWidth = h.width; b.dataset.headText = head.innerText; }
})();
</script>"""


def test_report_renders_in_headless_chromium(v21_report: tuple[str, str], tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "no Chromium found (install Debian's chromium-headless-shell or chromium, or set OWNERSHIP_CHROMIUM); "
            "the report's structure is still checked by test_report_is_self_contained_and_complete"
        )
    doc, _ = v21_report
    page = tmp_path / "probe.html"
    page.write_text(doc.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1300,2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))
    assert float(attrs["svg-width"]) > 100 and float(attrs["svg-height"]) > 100, attrs
    assert float(attrs["head-width"]) > 0
    assert " ".join(attrs["head-text"].split()) == "VIOLATED no_foreign_read in sglang_disagg_v0_5_19 (explore)"
    assert "<svg" in dom
