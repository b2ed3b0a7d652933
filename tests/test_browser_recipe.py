"""A target's recipe edited on the Datasets page in real Chromium (the fixtures of
tests/test_browser.py): a CheXpert-like folder registered with its one-column-per-finding table
lists its targets; on the mapping form the user picks the Cardiomegaly target, types the
finding into the value map's "uncertain" row (the preview counts the -1 rows as positive),
saves; then gives the Sex field the class role (the preview says two targets cannot be read at
once), sets Cardiomegaly to "not used", sees the preview switch to Female / Male and saves.
Each saved datacard reads the folder by the edited recipe, as ``crew register --recipe`` would
(tests/test_records_recipe_cli.py); the dataset folder is never changed."""
from __future__ import annotations

import re

import pytest

from tests.conftest import tree_digest
from tests.test_browser import _settle, _shot, browser_path, server  # noqa: F401 (fixtures)

DESCRIPTION = "Chest X-rays with one column per finding"
ROW_PX = 35   # st.data_editor's row height


def _choose(page, label: str, option: str) -> None:
    """Pick ``option`` in the select box labelled ``label`` (type to filter, then click)."""
    from playwright.sync_api import expect

    box = page.get_by_role("combobox", name=label, exact=True)
    expect(box).to_have_count(1, timeout=30_000)   # no stale copy left from a rerun
    box.click()
    box.fill(option)
    page.get_by_role("option", name=option, exact=True).click()
    _settle(page)
    expect(box).to_have_count(1, timeout=30_000)
    expect(box).to_have_value(option, timeout=30_000)


def _caption(main, pattern: str):
    """The preview's caption ("Diagnosis: class count, ...; patients by ...")."""
    return main.get_by_text(re.compile(r"^Diagnosis: .*" + pattern)).first


def _edit_cell(page, column: str, row: int, text: str) -> None:
    """Type ``text`` into the last column's cell of ``row`` of the data editor whose header
    has ``column`` (a canvas grid: by position, rows of ROW_PX under one header row)."""
    editor = page.get_by_test_id("stDataFrame").filter(has_text=column)
    editor.scroll_into_view_if_needed()
    box, previous = editor.bounding_box(), None
    while box != previous:   # wait out a smooth scroll or a late layout change
        page.wait_for_timeout(250)
        box, previous = editor.bounding_box(), box
    page.mouse.dblclick(box["x"] + box["width"] - 60, box["y"] + ROW_PX * (row + 1) + ROW_PX / 2)
    entry = page.locator(".gdg-input").first   # the grid's cell editor
    entry.wait_for(state="visible", timeout=10_000)
    entry.fill(text)
    entry.press("Enter")
    entry.wait_for(state="hidden", timeout=10_000)
    page.wait_for_timeout(500)
    _settle(page)


def _save(page, main) -> None:
    """Click "Save recipe" and wait for the page to say so (after the rerun that follows)."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Save recipe").click()
    saved = main.get_by_text("Saved the recipe of", exact=False)
    expect(saved.first).to_be_visible(timeout=120_000)
    _settle(page)
    expect(saved.first).to_be_visible(timeout=60_000)
    _into_view(saved.first)


def _into_view(locator, tries: int = 3) -> None:
    """Scroll to an element (for the screenshot); a rerun may redraw it meanwhile."""
    for attempt in range(tries):
        try:
            locator.scroll_into_view_if_needed(timeout=10_000)
            return
        except Exception:  # noqa: BLE001 - detached by a redraw: find it again
            if attempt == tries - 1:
                raise


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_value_map_and_a_field_role_changed_on_the_form_change_the_saved_card(
        browser_path, server, monkeypatch, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from core.config.settings import get_settings
    from core.datasets.catalog import find_entry
    from core.datasets.records.preview import FIELD_ROLES, recipe_source, value_rows
    from core.datasets.registration import register_dataset
    from core.demo.record_families import RECORD_BY_NAME
    from core.store.db import open_store

    monkeypatch.setenv("M3B_HOME", str(server["home"]))
    monkeypatch.delenv("M3B_LLM", raising=False)
    settings = get_settings()
    family = RECORD_BY_NAME["chexpert_table"]
    data = family.generate(tmp_path / "data" / family.folder, scale=0.25)
    result = register_dataset(settings, open_store(settings.store_path), str(data), "CXP",
                              DESCRIPTION)
    assert result["status"] == "registered", result["errors"]
    before, folder = find_entry(settings, "CXP").card, tree_digest(data)
    assert "Cardiomegaly" in [t["name"] for t in before.targets] and len(before.targets) > 2

    cardio = next(t for t in before.targets if t["name"] == "Cardiomegaly")
    positives = cardio["class_counts"]["Cardiomegaly"]
    uncertain = next(r["rows"] for r in value_rows(recipe_source(data, cardio["recipe"]),
                                                   cardio["recipe"])
                     if r["value"] == "uncertain")
    assert uncertain > 0 and cardio["recipe"]["values"]["uncertain"] is None

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        done = False
        try:
            page.goto(f"{server['url']}/datasets")
            _settle(page)
            main = page.get_by_test_id("stMain")
            expect(main.get_by_text("Targets and recipe").first).to_be_visible(timeout=60_000)
            _choose(page, "Target to edit", "Cardiomegaly")
            expect(_caption(main, rf"\bno Cardiomegaly \d+, Cardiomegaly {positives};")) \
                .to_be_visible(timeout=60_000)

            # 1. the value map: the uncertain (-1) rows read as the finding (U-Ones)
            _edit_cell(page, "Reads as", row=2, text="Cardiomegaly")
            expect(_caption(main, rf"\bCardiomegaly {positives + uncertain};")).to_be_visible(
                timeout=60_000)
            _into_view(main.get_by_text("Preview", exact=True))
            _shot(page, "recipe_1_uncertain_as_positive")
            assert find_entry(settings, "CXP").card.class_counts == before.class_counts
            _save(page, main)
            card = find_entry(settings, "CXP").card
            assert card.class_counts["Cardiomegaly"] == positives + uncertain
            assert card.targets[0]["recipe"]["values"]["uncertain"] == "Cardiomegaly"
            assert len(card.targets) == len(before.targets)   # the others kept

            # 2. the Sex field as the class: two target fields, which the preview refuses
            _choose(page, "Sex", FIELD_ROLES["class"])
            expect(main.get_by_text("different roles", exact=False).first).to_be_visible(
                timeout=60_000)
            expect(page.get_by_role("button", name="Save recipe")).to_be_disabled()
            _into_view(main.get_by_text("different roles", exact=False).first)
            _shot(page, "recipe_2_two_targets")

            # Cardiomegaly no longer the target: the preview reads the folder by Sex
            _choose(page, "Cardiomegaly", FIELD_ROLES[""])
            expect(_caption(main, r"(Female|Male) \d+, (Female|Male) \d+;")).to_be_visible(
                timeout=60_000)
            expect(main.get_by_text("different roles", exact=False)).to_have_count(0)
            _into_view(main.get_by_text("Preview", exact=True))
            _shot(page, "recipe_3_preview_by_sex")
            assert find_entry(settings, "CXP").card.classes == card.classes  # not yet
            _save(page, main)
            _shot(page, "recipe_4_saved")
            expect(page.get_by_role("combobox", name="Target to edit", exact=True)) \
                .to_have_value("Sex", timeout=30_000)       # the card's first target now
            done = True
        finally:
            if not done:
                _shot(page, "recipe_failure_last_page")
            browser.close()
    assert not errors, errors
    card = find_entry(settings, "CXP").card
    assert sorted(card.classes) == ["Female", "Male"]
    first = card.targets[0]     # the saved target first; the card's others are kept
    assert first["recipe"]["role"] == "class" and first["recipe"]["fields"] == ["Sex"]
    assert first["edited"] and not any(t.get("edited") for t in card.targets[1:])
    assert any(t["recipe"]["values"].get("uncertain") == "Cardiomegaly"
               for t in card.targets[1:] if t.get("recipe"))   # the first save's edit
    assert tree_digest(data) == folder
