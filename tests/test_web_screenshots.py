"""The screenshots in docs/ (docs/viewer-*.png) are the current viewer's.

scripts/screenshots.py takes them with the tests' browser (Debian's headless chromium via Playwright) from a demo
ledger served by ``ledger view``, and writes beside them docs/viewer-screenshots.json: per picture its size, its
sha256 and a digest of what the page was made of (text with ids and times masked, the bars' parts, the replay's
timeline, each chart's data, ranges and points), and the style sheet's digest. Pictures are not compared pixel for
pixel: fonts, anti-aliasing and the toolkit's ids and times differ from run to run.

- the committed pictures are the ones the manifest names (nothing added, dropped or edited by hand), each shown by
  docs/viewer.md;
- the pictures are taken again into a temporary folder: every page is made of what the committed manifest says,
  with the same style sheet, at the same size. A change of the viewer that shows on a page fails here until
  ``.venv/bin/python scripts/screenshots.py`` is run and the new pictures are looked at and committed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.heavy  # a browser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _committed(shots: ModuleType) -> dict[str, dict]:
    manifest: dict[str, dict] = json.loads((DOCS / shots.MANIFEST).read_text())
    return manifest


def test_committed_pictures_are_those_of_the_manifest() -> None:
    shots = _script()
    manifest = _committed(shots)
    pictures = sorted(p.name for p in DOCS.glob("viewer-*.png"))
    assert sorted(manifest["shots"]) == pictures, "run .venv/bin/python scripts/screenshots.py"
    page = (DOCS / "viewer.md").read_text()
    for name, shot in manifest["shots"].items():
        path = DOCS / name
        assert shots.digest(path.read_bytes()) == shot["sha256"], f"{name} is not the picture the script took"
        assert list(shots.png_size(path)) == shot["size"], name
        assert f"]({name})" in page, f"docs/viewer.md does not show {name}"


def test_pictures_are_taken_from_the_current_code(tmp_path: Path) -> None:
    shots = _script()
    committed = _committed(shots)
    made = shots.take(tmp_path)
    again = "run .venv/bin/python scripts/screenshots.py, look at the pictures and commit them"
    assert made["style"] == committed["style"], f"viewer.css changed since the pictures in docs/ were taken: {again}"
    assert sorted(made["shots"]) == sorted(committed["shots"])
    stale = {
        name: str(tmp_path / f"{name}.json")
        for name, shot in made["shots"].items()
        if shot["page"] != committed["shots"][name]["page"]
    }
    assert not stale, f"pages now differ from their pictures in docs/ (what each is made of now: {stale}): {again}"
    for name, shot in made["shots"].items():
        assert shot["size"] == committed["shots"][name]["size"], name
        # A picture of a page, not of a blank or an error: the browser drew text and charts into it.
        assert (tmp_path / name).stat().st_size > 20_000, name
