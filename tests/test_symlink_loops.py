"""Symlinks in a dataset folder never crash a scan or a registration: a file link loop
(a -> b, b -> a), a self-loop, a folder loop (sub/up -> ..), a dangling link and a link that
leads out of the folder are each skipped with a warning that names it; links that stay inside
are read; the folder is byte-identical afterwards (names, modes, mtimes, contents, link
targets)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fuzz_registration import digest
from core.datasets.layouts import links
from core.datasets.layouts.dispatch import scan_folder

ROOT = Path(__file__).resolve().parent.parent
BAD = {"NORMAL/a.png": "symlink loop", "NORMAL/b.png": "symlink loop",
       "NORMAL/self.png": "symlink loop", "NORMAL/up": "symlink loop",
       "PNEUMONIA/gone.png": "dangling symlink", "PNEUMONIA/out.png": "outside the dataset",
       "outdir": "outside the dataset"}


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    """The small chest X-ray set with every kind of bad link planted, one good link inside,
    and a canary folder outside that a link points at."""
    from core.demo.chest_xray import make_chest_xray_demo
    base = tmp_path_factory.mktemp("loops")
    folder = make_chest_xray_demo(base / "cxr", patients_per_class=14, size=32)
    outside = base / "outside"
    outside.mkdir()
    (outside / "patient9999_1.png").write_bytes(
        sorted((folder / "NORMAL").glob("*.png"))[0].read_bytes())
    normal, pneumonia = folder / "NORMAL", folder / "PNEUMONIA"
    os.symlink("b.png", normal / "a.png")
    os.symlink("a.png", normal / "b.png")
    os.symlink("self.png", normal / "self.png")
    os.symlink("..", normal / "up")
    os.symlink("nowhere.png", pneumonia / "gone.png")
    os.symlink(outside / "patient9999_1.png", pneumonia / "out.png")
    os.symlink(outside, folder / "outdir")
    first = sorted(pneumonia.glob("patient*.png"))[0]
    os.symlink(first.name, pneumonia / "patient7777_1.png")  # a good link: stays inside
    return folder


def test_scan_skips_every_bad_link_and_names_it(looped):
    before = digest(looped)
    scan = scan_folder(looped)
    skipped = {os.path.relpath(p, looped): why
               for p, why in scan.details["skipped_links"].items()}
    assert set(skipped) == set(BAD), skipped
    for name, words in BAD.items():
        assert words in skipped[name], (name, skipped[name])
    images = {os.path.relpath(str(s.image), looped) for s in scan.samples}
    assert not images & set(BAD)
    assert "PNEUMONIA/patient7777_1.png" in images  # a link inside the folder is read
    assert not any("9999" in i for i in images)
    assert digest(looped) == before


def test_registration_succeeds_with_a_warning_naming_each_link(looped, settings, store):
    from core.datasets.registration import register_dataset
    before = digest(looped)
    result = register_dataset(settings, store, str(looped), "Looped X-rays",
                              "chest X-ray PNGs, NORMAL vs PNEUMONIA folders")
    assert result["status"] == "registered", result
    warning = next(w for w in result["warnings"] if "symlink" in w)
    for name in BAD:
        assert f"{name}: " in warning, (name, warning)
    assert "Replace each" in warning
    report = json.loads(Path(result["validation_path"]).read_text())
    assert warning in report["warnings"]
    assert digest(looped) == before


def test_datasets_page_scan_step_survives_the_links(looped):
    from core.datasets.drafting import draft_dataset
    before = digest(looped)
    draft = draft_dataset(str(looped), "Looped", "chest X-ray PNGs")
    assert set(draft.scan.details["skipped_links"]) == {str(looped / n) for n in BAD}
    assert digest(looped) == before


def test_cli_register_prints_the_warning_and_exits_zero(looped, tmp_path):
    before = digest(looped)
    proc = subprocess.run([sys.executable, "-m", "crew", "register", str(looped), "--name",
                           "Looped CLI", "--home", str(tmp_path / "home"), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CREWAI_TESTING": "true"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    warning = next(w for w in result["warnings"] if "symlink" in w)
    assert all(f"{name}: " in warning for name in BAD), warning
    assert digest(looped) == before


def test_walk_matches_os_walk_without_links(tmp_path):
    for d in ("a/b/c", "a/d", "e"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("x.png", "a/y.png", "a/b/c/z.png", "e/w.png"):
        (tmp_path / f).write_bytes(b"1")
    os.symlink("a", tmp_path / "link_a")  # a good folder link: listed, not descended

    def norm(walk):
        return [(top, sorted(dirs), sorted(files)) for top, dirs, files in walk]
    assert norm(links.walk(tmp_path)) == norm(os.walk(tmp_path))
    pruned = []
    for top, dirs, _ in links.walk(tmp_path):
        dirs[:] = [d for d in dirs if d != "a"]
        pruned.append(os.path.relpath(top, tmp_path))
    assert pruned == [".", "e"]  # pruned folders and folder links are not entered


def test_a_link_problem_is_judged_without_following_it(tmp_path):
    os.symlink("loop", tmp_path / "loop")
    os.symlink("/", tmp_path / "root")
    (tmp_path / "f").write_text("x")
    os.symlink("f", tmp_path / "ok")
    with links.watching(tmp_path):
        assert "loop" in links.link_problem(tmp_path / "loop")
        assert "outside" in links.link_problem(tmp_path / "root")
        assert links.link_problem(tmp_path / "ok") is None
        assert links.link_problem(tmp_path / "f") is None
        assert links.kept([tmp_path / "loop", tmp_path / "ok", tmp_path / "f"]) == [
            tmp_path / "ok", tmp_path / "f"]
        assert set(links.skipped_links()) == {str(tmp_path / "loop")}
    assert links.skipped_links() == {}
