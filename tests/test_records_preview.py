"""The recipe's mapping form and live preview (core.datasets.records.preview) and the Datasets
page's form over it (AppTest): on a CheXpert-like table, reading the uncertain (-1) rows as the
finding instead of leaving them out changes the counts; a wrong role or field is named in the
error; a field given another role makes another target; nothing is ever written (no datacard,
no report, nothing in the dataset folder) until "Save recipe", which re-registers the card the
way ``crew register --recipe`` does (tests/test_records_recipe_cli.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.datasets.catalog import find_entry
from core.datasets.records.preview import (FIELD_ROLES, field_roles, form_fields,
                                           preview_recipe, recipe_from_roles, recipe_source,
                                           value_rows, values_of_rows)
from core.datasets.records.recipe import RecipeError
from core.datasets.registration import register_dataset
from core.demo.record_families import RECORD_BY_NAME
from tests.conftest import tree_digest

APP = Path(__file__).resolve().parent.parent / "app.py"
DESCRIPTION = "Chest X-rays with one column per finding"


@pytest.fixture(scope="module")
def chexpert(tmp_path_factory) -> Path:
    family = RECORD_BY_NAME["chexpert_table"]
    return family.generate(tmp_path_factory.mktemp("cxp") / family.folder, scale=0.25)


def _written(settings) -> list[str]:
    folder = Path(settings.datacards_dir)
    return sorted(p.name for p in folder.glob("*")) if folder.exists() else []


@pytest.fixture
def registered(settings, store, chexpert) -> dict:
    result = register_dataset(settings, store, str(chexpert), "CXP", DESCRIPTION)
    assert result["status"] == "registered", result["errors"]
    return {t["name"]: t for t in result["targets"]}


def test_uncertain_read_as_the_finding_changes_the_counts_and_writes_nothing(
        settings, chexpert, registered):
    cardio = registered["Cardiomegaly"]["recipe"]
    assert cardio["values"]["uncertain"] is None        # left out by default
    folder, cards = tree_digest(chexpert), _written(settings)
    plain = preview_recipe(chexpert, cardio, DESCRIPTION)
    assert plain["ok"], plain["error"]
    assert plain["class_counts"] == registered["Cardiomegaly"]["class_counts"]
    assert plain["classes"] == ["Cardiomegaly", "no Cardiomegaly"]
    assert 0 < plain["coverage"] < 1 and plain["num_images"] > plain["num_samples"]
    row = plain["examples"][0]
    assert set(row) == {"file", "label", "patient", "split"}
    assert row["file"].startswith("CheXpert-v1.0-small/") and row["patient"].startswith(
        "patient") and row["split"] in ("train", "val", "test")

    # the value map as the form shows it: uncertain rows exist and read as nothing
    source = recipe_source(chexpert, cardio)
    rows = {r["value"]: r for r in value_rows(source, cardio)}
    assert rows["uncertain"]["rows"] > 0 and rows["uncertain"]["reads_as"] is None
    edited = [dict(r, reads_as="Cardiomegaly" if r["value"] == "uncertain" else r["reads_as"])
              for r in rows.values()]
    u_ones = recipe_from_roles(cardio, field_roles(cardio), values=values_of_rows(edited))
    assert u_ones["values"]["uncertain"] == "Cardiomegaly"
    ones = preview_recipe(chexpert, u_ones, DESCRIPTION)
    assert ones["ok"], ones["error"]
    assert ones["class_counts"]["Cardiomegaly"] == \
        plain["class_counts"]["Cardiomegaly"] + rows["uncertain"]["rows"]
    assert ones["class_counts"]["no Cardiomegaly"] == plain["class_counts"]["no Cardiomegaly"]
    assert ones["coverage"] > plain["coverage"]
    assert tree_digest(chexpert) == folder and _written(settings) == cards


def test_a_wrong_role_or_field_is_named_in_the_error_and_nothing_is_written(
        settings, chexpert, registered):
    cardio = registered["Cardiomegaly"]["recipe"]
    folder, cards = tree_digest(chexpert), _written(settings)
    wrong = preview_recipe(chexpert, dict(cardio, fields=["Sex"]), DESCRIPTION)
    assert not wrong["ok"] and "Sex" in wrong["error"] and "use role class" in wrong["error"]
    mask = preview_recipe(chexpert, dict(cardio, role="mask", fields=["Sex"]), DESCRIPTION)
    assert not mask["ok"] and "no mask file" in mask["error"]
    guess = preview_recipe(chexpert, dict(cardio, role="guess"), DESCRIPTION)
    assert not guess["ok"] and "role 'guess' is not one of" in guess["error"]
    typo = preview_recipe(chexpert, dict(cardio, fields=["Cardiomegally"]), DESCRIPTION)
    assert not typo["ok"] and "Cardiomegally" in typo["error"]
    gone = preview_recipe(chexpert, dict(cardio, source="nowhere.csv"), DESCRIPTION)
    assert not gone["ok"] and "nowhere.csv" in gone["error"]
    assert all(p["examples"] == [] and p["class_counts"] == {} for p in (wrong, mask, guess))
    assert tree_digest(chexpert) == folder and _written(settings) == cards


def test_field_roles_make_a_recipe_and_say_what_to_change(chexpert, registered):
    cardio = registered["Cardiomegaly"]["recipe"]
    source = recipe_source(chexpert, cardio)
    fields = {f["name"]: f for f in form_fields(source, cardio)}
    assert fields["Path"]["part"] == "image" and fields["Cardiomegaly"]["part"] == "finding"
    assert fields["Sex"]["part"] == "" and fields["Sex"]["examples"] == ["Female", "Male"]
    assert {f["part"] for f in fields.values()} <= set(FIELD_ROLES)
    parts = field_roles(cardio)
    with pytest.raises(RecipeError, match="different roles .*Sex is class"):
        recipe_from_roles(cardio, dict(parts, Sex="class"))
    with pytest.raises(RecipeError, match="names the images"):
        recipe_from_roles(cardio, dict(parts, Path=""))
    with pytest.raises(RecipeError, match="reads one field.*use 'findings'"):
        recipe_from_roles(cardio, dict(parts, Edema="finding"))
    with pytest.raises(RecipeError, match="target role"):
        recipe_from_roles(cardio, dict(parts, Cardiomegaly=""))
    by_sex = recipe_from_roles(cardio, dict(parts, Sex="class", Cardiomegaly=""))
    assert (by_sex["role"], by_sex["fields"], by_sex["name"]) == ("class", ["Sex"], "Sex")
    assert by_sex["values"] == {} and by_sex["split_field"] == cardio["split_field"]
    assert [r["value"] for r in value_rows(source, by_sex)] in (["Female", "Male"],
                                                                ["Male", "Female"])
    preview = preview_recipe(chexpert, by_sex, DESCRIPTION)
    assert preview["ok"] and sorted(preview["classes"]) == ["Female", "Male"]
    edema = recipe_from_roles(cardio, dict(parts, Edema="finding", Cardiomegaly=""))
    assert edema["values"] == {"pos": "Edema", "neg": "no Edema", "uncertain": None,
                               "blank": None}


def test_every_recipe_rebuilt_from_its_own_field_roles_is_unchanged(registered):
    """The form opened and saved untouched reads the folder as before: every target of the
    card, and a study id that both names the images and groups them (an IU-Xray-like join)."""
    joined = {"source": "reports.csv", "image_field": "study", "match": "id", "role": "report",
              "fields": ["findings", "impression"], "values": {}, "group_field": "study",
              "split_field": "split", "name": "report"}
    recipes = [t["recipe"] for t in registered.values() if t.get("recipe")] + [joined]
    assert len(recipes) > 3
    for recipe in recipes:
        again = recipe_from_roles(recipe, field_roles(recipe))
        assert {k: again[k] for k in joined} == {k: recipe[k] for k in joined}, recipe


# ------------------------------------------------------------------------------ the page
def _page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/datasets.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _field_box(at: AppTest, name: str):
    return next(s for s in at.selectbox if s.label == name and s.key.startswith("rcp_"))


def test_the_datasets_page_edits_a_target_recipe_and_saves_it(settings, chexpert, registered):
    before = find_entry(settings, "CXP").card
    assert len(before.targets) == len(registered) > 2
    folder = tree_digest(chexpert)
    at = _page()
    table = next(d.value for d in at.dataframe if "Coverage" in d.value.columns)
    assert {"Cardiomegaly", "Edema", "findings"} <= set(table["Target"])
    pick = next(s for s in at.selectbox if s.label == "Target to edit")
    pick.set_value(registered["Cardiomegaly"]["id"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert _field_box(at, "Cardiomegaly").value == "finding"
    assert any(m.label == "Coverage" for m in at.metric)

    _field_box(at, "Sex").set_value("class").run()      # two targets: the error says so
    assert "different roles" in "\n".join(e.value for e in at.error)
    assert at.button(key=next(b.key for b in at.button if b.label == "Save recipe")).disabled
    _field_box(at, "Cardiomegaly").set_value("").run()
    assert not at.error, [e.value for e in at.error]
    counts = next(d.value for d in at.dataframe if list(d.value.columns) == ["Class", "Images"])
    assert sorted(counts["Class"]) == ["Female", "Male"]
    assert find_entry(settings, "CXP").card.classes == before.classes   # not saved yet

    next(b for b in at.button if b.label == "Save recipe").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Saved the recipe of" in "\n".join(s.value for s in at.success)
    card = find_entry(settings, "CXP").card
    assert sorted(card.classes) == ["Female", "Male"]
    assert card.targets[0]["recipe"]["fields"] == ["Sex"] and card.targets[0]["edited"]
    assert len(card.targets) == len(before.targets) + 1   # Sex added first, none lost
    assert next(s for s in at.selectbox if s.label == "Target to edit").value == \
        card.targets[0]["id"]
    assert _field_box(at, "Sex").value == "class" and not at.error
    assert tree_digest(chexpert) == folder


def test_saving_an_edited_recipe_keeps_the_cards_other_targets(settings, store, chexpert,
                                                               registered):
    """Re-registering a card by one edited target's recipe puts that target first (marked as
    edited, so a later edit of the card reads by it) and loses none of the others."""
    from core.datasets.registration import update_datacard

    before = find_entry(settings, "CXP").card.targets
    cardio = registered["Cardiomegaly"]["recipe"]
    u_ones = dict(cardio, values=dict(cardio["values"], uncertain="Cardiomegaly"))
    result = register_dataset(settings, store, str(chexpert), "CXP", DESCRIPTION,
                              recipe=u_ones)
    assert result["status"] == "registered", result["errors"]
    card = find_entry(settings, "CXP").card
    assert card.targets[0]["edited"] and card.targets[0]["recipe"]["values"]["uncertain"] \
        == "Cardiomegaly"
    assert {t["id"] for t in card.targets} == {t["id"] for t in before}
    assert card.class_counts["Cardiomegaly"] > registered["Cardiomegaly"]["class_counts"][
        "Cardiomegaly"]
    updated = update_datacard(settings, store, "CXP", {"description": DESCRIPTION + "."})
    assert updated["status"] == "updated", updated["errors"]
    again = find_entry(settings, "CXP").card
    assert again.class_counts == card.class_counts   # still read by the edited recipe
