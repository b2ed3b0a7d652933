"""The Datasets page (AppTest) and the registration functions behind it: scan and draft without
saving, validate and save, upload a zip, edit and delete registered datacards, built-in example
cards. Every bad input shows a clear message and leaves the datacards folder, the store rows,
the uploads folder and the dataset folder exactly as they were."""
from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.demo.chest_xray import DEMO_DESCRIPTION, make_chest_xray_demo
from core.demo.segmentation import make_xray_organ_demo_2d
from core.datasets.registration import delete_datacard, register_dataset, update_datacard
from core.config.settings import BUILTIN_DATACARDS
from core.datasets.uploads import uploads_dir
from core.config.user_settings import save_settings
from tests.conftest import tree_digest

APP = Path(__file__).resolve().parent.parent / "app.py"
BUILTIN_NAMES = sorted(json.loads(p.read_text())["dataset name"]
                       for p in BUILTIN_DATACARDS.glob("*.json"))


# ------------------------------------------------------------------------------ helpers
@pytest.fixture
def chest(tmp_path) -> Path:
    """A small class-folder dataset (2 classes, 12 patients each)."""
    return make_chest_xray_demo(tmp_path / "data" / "chest", patients_per_class=12)


def run_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/datasets.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def click(at: AppTest, label: str | None = None, key: str | None = None) -> AppTest:
    button = at.button(key=key) if key else next(b for b in at.button if b.label == label)
    button.click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def plain(text: str) -> str:
    """Markdown as read: no bold markers, no escapes."""
    return re.sub(r"\\(.)", r"\1", str(text).replace("**", ""))


def errors(at: AppTest) -> str:
    return plain("\n".join(e.value for e in at.error))


def successes(at: AppTest) -> str:
    return plain("\n".join(e.value for e in at.success))


def has_review(at: AppTest) -> bool:
    return any(b.label == "Validate and save" for b in at.button)


def snapshot(settings, store) -> tuple:
    """The datacards folder (names and bytes), the store's datacard rows, the uploads."""
    cards = {p.name: p.read_bytes() for p in sorted(settings.datacards_dir.iterdir())}
    up = uploads_dir(settings)
    uploads = sorted(p.name for p in up.iterdir()) if up.exists() else []
    return cards, store.datacards(), uploads


def scan(at: AppTest, path: str, name: str = "", description: str = "") -> AppTest:
    at.text_input(key="scan_path").input(path)
    at.text_input(key="scan_name").input(name)
    at.text_area(key="scan_description").input(description)
    return click(at, "Scan")


def zip_bytes(entries: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buffer.getvalue()


def zip_folder(folder: Path) -> bytes:
    return zip_bytes([(str(Path(folder.name) / p.relative_to(folder)), p.read_bytes())
                      for p in sorted(folder.rglob("*")) if p.is_file()])


def zip_uploader(at: AppTest):
    """The zip uploader (its key is renewed after each save, which drops the zip it held)."""
    return next(u for u in at.get("file_uploader") if u.label == "Dataset zip")


def upload(at: AppTest, filename: str | None, data: bytes, name: str = "") -> AppTest:
    if filename is not None:
        zip_uploader(at).set_value((filename, data, "application/zip"))
    at.text_input(key="upload_name").input(name)
    return click(at, "Upload and scan")


# ------------------------------------------------------------------------------ catalog
def test_builtin_cards_are_examples_until_their_folder_exists(settings):
    assert len(BUILTIN_NAMES) == 14
    at = run_page()
    catalog = at.dataframe[0].value
    builtin = catalog[catalog["Source"] == "Built-in"]
    assert sorted(builtin["Name"]) == BUILTIN_NAMES
    assert set(builtin["Available"]) == {"✗"}
    assert "No registered datacards yet" in "\n".join(i.value for i in at.info)
    assert not [b for b in at.button if b.label.startswith("Delete this datacard")]

    (settings.datasets_dir / "ADNI").mkdir()
    at = run_page()
    catalog = at.dataframe[0].value
    assert catalog.set_index("Name").loc["ADNI", "Available"] == "✓"
    assert catalog.iloc[0]["Name"] == "ADNI", "available datasets are listed first"


# ------------------------------------------------------------------------------ register
def test_scan_drafts_without_saving_then_validate_and_save(settings, store, chest):
    data_before = tree_digest(chest)
    before = snapshot(settings, store)
    at = run_page()
    scan(at, str(chest), description=DEMO_DESCRIPTION)
    assert not at.error and has_review(at)
    assert snapshot(settings, store) == before, "scanning must not save anything"
    ss = at.session_state
    assert ss["rev_name"] == "chest"  # proposed from the folder
    assert ss["rev_tasks"] == ["diagnosis"]
    assert ss["rev_modality"] == "X-ray" and ss["rev_anatomy"] == "chest"
    assert at.multiselect(key="rev_tasks").options == ["Diagnosis"]
    classes = at.dataframe[1].value
    assert dict(zip(classes["Class"], classes["Samples"])) == {"NORMAL": 17, "PNEUMONIA": 18}
    thumbs = at.get("image")
    assert [len(t.value) for t in thumbs] == [3, 3]  # a few images per class, bounded
    text = plain("\n".join(c.value for c in at.caption))
    assert "class_folders" in text and "filename prefix" in text

    at.switch_page("pages/models.py").run()  # leaving the page keeps the draft
    at.switch_page("pages/datasets.py").run()
    assert has_review(at) and at.session_state["rev_name"] == "chest"
    at.text_input(key="rev_name").input("Ward chest X-ray")
    at.text_input(key="rev_modality").input("X-ray")
    at.text_input(key="rev_provenance").input("St Elsewhere PACS export 2024")
    click(at, "Validate and save")
    assert "Registered Ward chest X-ray (Diagnosis)" in successes(at), errors(at)
    card = json.loads((settings.datacards_dir / "Ward_chest_X-ray.json").read_text())
    assert card["dataset path"] == str(chest)
    assert (card["modality"], card["anatomy"], card["provenance"]) == (
        "X-ray", "chest", "St Elsewhere PACS export 2024")
    assert card["class_counts"] == {"NORMAL": 17, "PNEUMONIA": 18}
    report = json.loads((settings.datacards_dir / "Ward_chest_X-ray.validation.json")
                        .read_text())
    assert report["valid"] and report["counts"]["patients"] == 24
    assert "Ward chest X-ray" in [r["name"] for r in store.datacards()]
    counts = next(d.value for d in at.dataframe if "Patients" in d.value.columns)
    assert list(counts["Class"]) == ["NORMAL", "PNEUMONIA"]
    assert list(counts["Patients"]) == [12, 12]
    assert "Ward chest X-ray" in list(at.dataframe[0].value["Name"])
    assert not has_review(at), "the draft is gone once saved"
    assert tree_digest(chest) == data_before


def test_after_saving_the_form_is_empty_and_the_new_dataset_is_picked(settings, store, chest,
                                                                      tmp_path):
    """The form no longer shows the saved folder and name, and the registered cards' picker
    shows the new dataset, not the card it showed before; the success names it."""
    demo = make_chest_xray_demo(tmp_path / "demo", patients_per_class=12, seed=5)
    assert register_dataset(settings, store, str(demo), "A demo card", "")["status"] == \
        "registered"
    at = run_page()
    assert at.selectbox(key="card_pick").value == "A demo card"
    scan(at, str(chest), name="Ward chest X-ray")
    click(at, "Validate and save")
    assert "Registered Ward chest X-ray (Diagnosis). It is in the catalog and selected under " \
           "Registered datacards below." in successes(at), errors(at)
    assert at.text_input(key="scan_path").value == ""
    assert at.text_input(key="scan_name").value == ""
    assert at.text_area(key="scan_description").value == ""
    assert at.selectbox(key="card_pick").value == "Ward chest X-ray"
    assert any(m.value.startswith("**Ward chest X-ray**") for m in at.markdown)
    at.run()  # the next run keeps the choice and the empty form
    assert at.selectbox(key="card_pick").value == "Ward chest X-ray"
    assert at.text_input(key="scan_path").value == ""

    # the same through the zip upload: its name, description and zip are cleared too
    upload(at, "ward2.zip", zip_folder(chest), name="Ward upload")
    at.text_area(key="rev_description").input("Chest X-rays from the ward.")
    click(at, "Validate and save")
    assert "Registered Ward upload" in successes(at), errors(at)
    assert at.text_input(key="upload_name").value == ""
    assert at.text_area(key="upload_description").value == ""
    assert zip_uploader(at).value in (None, [])
    assert at.selectbox(key="card_pick").value == "Ward upload"


def test_segmentation_draft_offers_only_the_tasks_its_layout_can_train(settings, tmp_path):
    folder = make_xray_organ_demo_2d(tmp_path / "organs", n_cases=12)
    at = run_page()
    scan(at, str(folder), name="Chest organs")
    assert at.multiselect(key="rev_tasks").options == ["Segmentation", "Anomaly detection"]
    assert at.session_state["rev_tasks"] == ["segmentation"]
    assert [len(t.value) for t in at.get("image")] == [3]  # no per-image classes: "images"


@pytest.mark.parametrize("path, name, message", [
    ("", "", "give the dataset's folder on this server"),
    ("relative/chest", "", "is not a full path"),
    ("{tmp}/no such folder", "", "does not exist on this server"),
    ("{tmp}/notes.txt", "", "is a file, not a folder"),
    ("{tmp}/no_images", "", "no class folders with images"),
    ("{chest}", "../chest", "is not allowed"),
])
def test_bad_scan_input_changes_nothing(settings, store, chest, tmp_path, path, name, message):
    (tmp_path / "notes.txt").write_text("not a dataset")
    (tmp_path / "no_images" / "docs").mkdir(parents=True)
    (tmp_path / "no_images" / "docs" / "readme.txt").write_text("nothing to see")
    before, data_before = snapshot(settings, store), tree_digest(chest)
    at = run_page()
    scan(at, path.format(tmp=tmp_path, chest=chest), name)
    assert "Not scanned" in errors(at) and message in errors(at), errors(at)
    assert not has_review(at)
    assert snapshot(settings, store) == before
    assert tree_digest(chest) == data_before


def test_duplicate_name_is_refused_at_scan_and_at_save(settings, store, chest, tmp_path):
    other = make_chest_xray_demo(tmp_path / "other", patients_per_class=12, seed=3)
    assert register_dataset(settings, store, str(chest), "Ward", DEMO_DESCRIPTION)[
        "status"] == "registered"
    before = snapshot(settings, store)
    at = run_page()
    scan(at, str(other), name="ward")
    assert "already registered" in errors(at) and not has_review(at)
    scan(at, str(other), name="")
    assert has_review(at)
    at.text_input(key="rev_name").input("WARD")
    click(at, "Validate and save")
    assert "Not saved — nothing was written" in errors(at)
    assert "already registered" in errors(at)
    assert snapshot(settings, store) == before


def test_same_file_name_for_another_card_is_refused(settings, store, chest, tmp_path):
    other = make_chest_xray_demo(tmp_path / "other", patients_per_class=12, seed=3)
    assert register_dataset(settings, store, str(chest), "Ward A", "")["status"] == "registered"
    before = snapshot(settings, store)
    result = register_dataset(settings, store, str(other), "Ward_A", "", new_only=True)
    assert result["status"] == "invalid" and "Ward_A.json" in result["errors"][0]
    assert snapshot(settings, store) == before


def test_unreadable_images_are_reported_and_nothing_is_saved(settings, store, chest):
    for path in sorted((chest / "NORMAL").glob("*.png"))[:3]:
        path.write_bytes(b"not a png")
    before, data_before = snapshot(settings, store), tree_digest(chest)
    at = run_page()
    scan(at, str(chest), name="Broken chest")
    assert has_review(at)
    assert "could not be previewed" in plain("\n".join(c.value for c in at.caption))
    click(at, "Validate and save")
    text = errors(at)
    assert "Not saved — nothing was written" in text
    assert "3 files cannot be read as images" in text and "Remove or replace them" in text
    assert str(chest / "NORMAL") in text  # where
    assert snapshot(settings, store) == before
    assert tree_digest(chest) == data_before
    assert has_review(at), "the draft stays so the user can fix the data and retry"


def test_no_task_or_no_name_is_refused(settings, store, chest):
    before = snapshot(settings, store)
    at = run_page()
    scan(at, str(chest))
    at.multiselect(key="rev_tasks").set_value([])
    click(at, "Validate and save")
    assert "choose at least one task" in errors(at)
    at.multiselect(key="rev_tasks").set_value(["diagnosis"])
    at.text_input(key="rev_name").input("  ")
    click(at, "Validate and save")
    assert "give the dataset a name" in errors(at)
    assert snapshot(settings, store) == before


def test_trust_pickle_checkbox_is_offered_in_both_steps(chest):
    at = run_page()
    assert at.checkbox(key="scan_pickle").label.startswith("Trust this folder's pickle files")
    scan(at, str(chest))
    assert at.checkbox(key="rev_pickle").value is False


# ------------------------------------------------------------------------------ upload
def test_upload_zip_unpacks_scans_and_registers(settings, store, chest):
    at = run_page()
    upload(at, "chest.zip", zip_folder(chest), name="Uploaded chest")
    assert not at.error, errors(at)
    folder = uploads_dir(settings) / "Uploaded_chest"
    assert tree_digest(folder / "chest") == tree_digest(chest)
    assert has_review(at) and at.session_state["rev_name"] == "Uploaded chest"
    assert not list(settings.datacards_dir.glob("*.json")), "nothing saved before step 2"
    click(at, "Validate and save")
    assert "Registered Uploaded chest" in successes(at), errors(at)
    card = json.loads((settings.datacards_dir / "Uploaded_chest.json").read_text())
    assert card["dataset path"] == str((folder / "chest").resolve())


def test_upload_name_defaults_to_the_zip_name_and_a_reupload_replaces_the_draft(settings,
                                                                              chest):
    at = run_page()
    upload(at, "ward_export.zip", zip_folder(chest))
    assert (uploads_dir(settings) / "ward_export" / "chest").is_dir()
    assert at.session_state["rev_name"] == "ward_export"
    at.text_area(key="upload_description").input("Chest X-rays, NORMAL vs PNEUMONIA.")
    upload(at, "ward_export.zip", zip_folder(chest))
    assert not at.error, errors(at)
    assert sorted(p.name for p in uploads_dir(settings).iterdir()) == ["ward_export"]
    assert at.session_state["rev_description"] == "Chest X-rays, NORMAL vs PNEUMONIA."


def _bad_zips(chest: Path) -> dict[str, tuple[str | None, bytes, str]]:
    good = zip_folder(chest)
    return {
        "no file": (None, b"", "choose a .zip file first"),
        "not a zip": ("chest.zip", b"PNG images, honest", "not a readable zip"),
        "empty": ("chest.zip", b"", "empty"),
        "zip slip": ("chest.zip", zip_bytes([("chest/NORMAL/a.png", b"x"),
                                             ("../../evil.png", b"x")]),
                     "outside the dataset folder"),
        "absolute": ("chest.zip", zip_bytes([("/etc/cron.d/evil", b"x")]), "absolute path"),
        "bomb": ("chest.zip", zip_bytes([("chest/NORMAL/a.nii", bytes(20 * 1024 * 1024))]),
                 "zip-bomb guard"),
        "truncated": ("chest.zip", good[:len(good) // 2], "not a readable zip"),
        "no dataset": ("docs.zip", zip_bytes([("docs/readme.txt", b"hello")]),
                       "no class folders with images"),
    }


@pytest.mark.parametrize("case", ["no file", "not a zip", "empty", "zip slip", "absolute",
                                  "bomb", "truncated", "no dataset"])
def test_bad_upload_changes_nothing(settings, store, chest, tmp_path, case):
    filename, data, message = _bad_zips(chest)[case]
    before = snapshot(settings, store)
    at = run_page()
    upload(at, filename, data, name="Bad upload")
    assert message in errors(at), errors(at)
    assert not has_review(at)
    assert snapshot(settings, store) == before
    assert not list(tmp_path.rglob("evil*")) and not list(settings.home.rglob("evil*"))


def test_oversized_upload_is_refused(settings, store, chest):
    save_settings(settings.home, {"upload_max_mb": 1})
    buffer = io.BytesIO()  # 1.5 MB stored (uncompressed): over a 1 MB limit
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("chest/NORMAL/big.bin", bytes(1536 * 1024))
    before = snapshot(settings, store)
    at = run_page()
    assert "at most 1 MB zipped" in plain("\n".join(c.value for c in at.caption))
    upload(at, "big.zip", buffer.getvalue(), name="Big")
    assert "over the 1.0 MB limit" in errors(at), errors(at)
    assert snapshot(settings, store) == before


def test_upload_with_a_registered_name_is_refused_before_unpacking(settings, store, chest):
    assert register_dataset(settings, store, str(chest), "Ward", "")["status"] == "registered"
    before = snapshot(settings, store)
    at = run_page()
    upload(at, "chest.zip", zip_folder(chest), name="Ward")
    assert "already registered" in errors(at)
    assert snapshot(settings, store) == before


def test_discarding_an_upload_draft_removes_the_unpacked_copy(settings, store, chest):
    before = snapshot(settings, store)
    at = run_page()
    upload(at, "chest.zip", zip_folder(chest), name="Tmp chest")
    assert (uploads_dir(settings) / "Tmp_chest").is_dir()
    click(at, key="discard_draft")
    assert not has_review(at)
    assert snapshot(settings, store) == before


def test_unregistered_uploads_are_listed_and_can_be_deleted(settings, store, chest):
    at = run_page()
    upload(at, "chest.zip", zip_folder(chest), name="Left over")
    at = run_page()  # a new session: the draft is gone, its unpacked copy is not
    assert any("Left_over" in c.value for c in at.code)
    click(at, key="rm_upload_Left_over")
    assert not (uploads_dir(settings) / "Left_over").exists()


# ------------------------------------------------------------------------------ edit / delete
def test_edit_revalidates_and_never_touches_the_data(settings, store, chest):
    assert register_dataset(settings, store, str(chest), "Ward", DEMO_DESCRIPTION)[
        "status"] == "registered"
    card_path = settings.datacards_dir / "Ward.json"
    report_path = settings.datacards_dir / "Ward.validation.json"
    checked_before = json.loads(report_path.read_text())["checked_at"]
    data_before = tree_digest(chest)
    at = run_page()
    assert at.selectbox(key="card_pick").value == "Ward"
    at.text_input(key="edit_mod_Ward").input("CR")
    at.text_input(key="edit_ana_Ward").input("thorax")
    at.text_area(key="edit_desc_Ward").input(DEMO_DESCRIPTION + " Exported in 2024.")
    click(at, "Validate and save changes")
    assert "Updated Ward" in successes(at), errors(at)
    card = json.loads(card_path.read_text())
    assert (card["modality"], card["anatomy"]) == ("CR", "thorax")
    assert card["dataset description"].endswith("Exported in 2024.")
    assert card["class_counts"] == {"NORMAL": 17, "PNEUMONIA": 18} and "updated_at" in card
    assert json.loads(report_path.read_text())["checked_at"] > checked_before
    row = next(r for r in store.datacards() if r["name"] == "Ward")
    assert row["modality"] == "CR" and row["anatomy"] == "thorax"
    assert tree_digest(chest) == data_before


def test_bad_edits_change_nothing(settings, store, chest, tmp_path):
    assert register_dataset(settings, store, str(chest), "Ward", "")["status"] == "registered"
    before = snapshot(settings, store)
    at = run_page()
    at.multiselect(key="edit_tasks_Ward").set_value([])
    click(at, "Validate and save changes")
    assert "choose at least one task" in errors(at)
    assert snapshot(settings, store) == before

    for path in sorted((chest / "PNEUMONIA").glob("*.png"))[:2]:
        path.write_bytes(b"garbage")  # the data went bad since registration
    at = run_page()
    at.text_input(key="edit_mod_Ward").input("X-ray")
    click(at, "Validate and save changes")
    assert "2 files cannot be read as images" in errors(at)
    assert snapshot(settings, store) == before

    chest.rename(tmp_path / "moved")
    at = run_page()
    at.text_input(key="edit_mod_Ward").input("X-ray")
    click(at, "Validate and save changes")
    assert "is not there" in errors(at)
    assert snapshot(settings, store) == before


def test_delete_asks_first_and_keeps_the_data(settings, store, chest, tmp_path):
    other = make_chest_xray_demo(tmp_path / "other", patients_per_class=12, seed=3)
    assert register_dataset(settings, store, str(other), "Other", "")["status"] == "registered"
    assert register_dataset(settings, store, str(chest), "Ward", "")["status"] == "registered"
    data_before = tree_digest(chest)
    before = snapshot(settings, store)
    at = run_page()
    at.selectbox(key="card_pick").set_value("Ward").run()
    click(at, key="delete_card")
    assert any("Delete the datacard" in w.value for w in at.warning)
    assert snapshot(settings, store) == before, "asking is not deleting"
    click(at, key="cancel_delete")
    assert snapshot(settings, store) == before
    click(at, key="delete_card")
    click(at, key="confirm_delete")
    assert "Deleted the datacard Ward" in successes(at)
    assert sorted(p.name for p in settings.datacards_dir.iterdir()) == [
        "Other.json", "Other.validation.json"]
    assert "Ward" not in [r["name"] for r in store.datacards()]
    assert at.selectbox(key="card_pick").value == "Other"
    assert "Ward" not in list(at.dataframe[0].value["Name"])
    assert tree_digest(chest) == data_before
    assert store.rows("SELECT action FROM audit WHERE target = 'Ward'")[-1]["action"] == \
        "delete_datacard"


def test_builtin_cards_cannot_be_edited_or_deleted(settings, store):
    result = update_datacard(settings, store, "ADNI", {"modality": "CT"})
    assert result["status"] == "invalid" and "built-in" in result["errors"][0]
    result = delete_datacard(settings, store, "ADNI")
    assert result["status"] == "invalid" and "built-in" in result["errors"][0]
    assert (BUILTIN_DATACARDS / "ADNI.json").is_file()
    assert delete_datacard(settings, store, "nope")["errors"] == [
        "no datacard named 'nope'; nothing was deleted"]
    result = update_datacard(settings, store, "ADNI", {"dataset path": "/etc"})
    assert result["status"] == "invalid"


def test_update_refuses_fields_that_are_not_editable(settings, store, chest):
    assert register_dataset(settings, store, str(chest), "Ward", "")["status"] == "registered"
    before = snapshot(settings, store)
    result = update_datacard(settings, store, "Ward", {"path": "/etc"})
    assert result["status"] == "invalid" and "cannot be set: path" in result["errors"][0]
    result = update_datacard(settings, store, "Ward", {"tasks": ["segmentation"]})
    assert "does not fit this dataset's layout" in result["errors"][0]
    assert snapshot(settings, store) == before


def test_no_placeholder_reads_like_a_value():
    """A grey example path in an empty field looks like a folder already chosen: examples are
    introduced as examples."""
    at = run_page()
    for field in at.text_input:
        hint = field.proto.placeholder
        looks_like_a_path = bool(re.search(r"/\w", hint))
        assert not looks_like_a_path or (hint.startswith("the ") and "e.g." in hint), hint
