"""Segmentation masks shipped as drawn annotations instead of mask images: run-length encoded
masks in a table (relative column-major with ``-1`` rows and several rows per image; absolute
row-major in a long table with a class column), Aperio ImageScope XML outlines beside TIFF
tiles, and CVAT XML. Each folder is invented here, registered through the real registration,
and indexed: the label maps drawn into the job's Datapath hold exactly (runs) or nearly (filled
outlines) the pixels drawn, and nothing is written in the dataset folder."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

from conftest import tree_digest
from core.datasets.catalog import find_entry
from core.datasets.index_stage import build_index
from core.datasets.indexing import IndexBuildError, write_list_index
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.polygon_files import read_aperio
from core.datasets.layouts.run_length import choose_encoding, decode, parse_runs
from core.datasets.layouts.types import ScanError
from core.datasets.registration import register_dataset


# ----------------------------------------------------------------------------- encoders

def relative_column_major(mask: np.ndarray) -> str:
    """The SIIM-ACR competition's encoding: column-major, each start counted from the end of
    the previous run."""
    flat = np.concatenate([[0], mask.T.reshape(-1) > 0, [0]]).astype(np.int8)
    starts, ends = np.nonzero(np.diff(flat) == 1)[0], np.nonzero(np.diff(flat) == -1)[0]
    out, previous = [], 0
    for s, e in zip(starts, ends):
        out += [str(s - previous), str(e - s)]
        previous = e
    return " ".join(out)


def absolute_row_major(mask: np.ndarray) -> str:
    """Carvana / UW-Madison style: row-major, 1-indexed absolute starts."""
    flat = np.concatenate([[0], mask.reshape(-1) > 0, [0]]).astype(np.int8)
    starts, ends = np.nonzero(np.diff(flat) == 1)[0], np.nonzero(np.diff(flat) == -1)[0]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends))


def blob(shape, cy, cx, ry, rx) -> np.ndarray:
    y, x = np.ogrid[:shape[0], :shape[1]]
    return ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1


def picture(shape, masks, seed) -> np.ndarray:
    """Bright noisy background, each mask's pixels dark (what an annotator outlined)."""
    rng = np.random.default_rng(seed)
    image = rng.normal(160, 12, shape)
    for mask in masks:
        image[mask] = rng.normal(50, 8, int(mask.sum()))
    return np.clip(image, 0, 255).astype(np.uint8)


def save_dicom(path: Path, pixels: np.ndarray, sop: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = sop
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = SecondaryCaptureImageStorage, sop
    ds.StudyInstanceUID, ds.SeriesInstanceUID = path.parent.parent.name, path.parent.name
    ds.Modality, ds.PatientID = "CR", "anon-" + sop[-6:]
    ds.Rows, ds.Columns = pixels.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PixelData = pixels.tobytes()
    ds.save_as(path, enforce_file_format=True)


def register_and_index(settings, store, root: Path, name: str, description: str,
                       datapath: Path) -> tuple[dict, object, list[dict]]:
    """Register through the real registration, then index as the Data Engineer's stage does;
    (registration result, saved card, index entries)."""
    before = tree_digest(root)
    result = register_dataset(settings, store, str(root), name, description)
    assert result["status"] == "registered", (result["errors"], result.get("interpretations"))
    card = find_entry(settings, name).card
    plan = {"status": "ready", "dataset": name, "dataset_path": str(root),
            "template": "segmentation"}
    build_index(settings, plan, datapath, test_fraction=0.25, seed=0)
    entries = (json.loads((datapath / "train.json").read_text())
               + json.loads((datapath / "test.json").read_text()))
    assert tree_digest(root) == before            # nothing written in the dataset folder
    return result, card, entries


# ----------------------------------------------------------------------------- RLE tables

def siim_like(root: Path) -> dict[str, np.ndarray]:
    """Square DICOMs in study/series folders named by their SOPInstanceUID, train-rle.csv with
    'ImageId, EncodedPixels', ' -1' for no finding, one row per region (image 5: two rows),
    and unlabelled test DICOMs."""
    shape, truth, rows = (48, 48), {}, []
    for i in range(12):
        sop = generate_uid(entropy_srcs=["sop", str(i)])
        regions = []
        if i % 3:
            regions.append(blob(shape, 12 + i, 10 + 2 * i, 5, 3))
        if i == 5:
            regions.append(blob(shape, 36, 36, 4, 6))
        folder = root / "dicom-images-train" / generate_uid(entropy_srcs=["st", str(i)]) / \
            generate_uid(entropy_srcs=["se", str(i)])
        save_dicom(folder / f"{sop}.dcm", picture(shape, regions, i), sop)
        truth[sop] = np.any(regions, axis=0) if regions else np.zeros(shape, bool)
        rows += [f"{sop}, {relative_column_major(r)}" for r in regions] or [f"{sop}, -1"]
    for i in range(3):
        sop = generate_uid(entropy_srcs=["test", str(i)])
        save_dicom(root / "dicom-images-test" / f"1.2.3.{i}" / f"1.2.4.{i}" / f"{sop}.dcm",
                   picture(shape, [], 99 + i), sop)
    (root / "train-rle.csv").write_text("ImageId, EncodedPixels\n" + "\n".join(rows) + "\n")
    return truth


def test_relative_column_major_rle_with_no_finding_rows_and_unions(settings, store, tmp_path):
    root = tmp_path / "ptx"
    truth = siim_like(root)
    description = ("Chest radiographs in DICOM. The pneumothorax masks are run-length encoded "
                   "in train-rle.csv; -1 means no pneumothorax.")
    result, card, entries = register_and_index(settings, store, root, "PTX", description,
                                               tmp_path / "Datapath")
    assert card.tasks[0] == "segmentation" and card.classes == ["pneumothorax"]
    assert card.num_samples == 12                 # -1 rows are labelled samples, test is not
    target = card.targets[0]
    assert target["id"] == "drawn_masks" and target["encoding"]["relative"] is True
    assert target["encoding"]["order"] == "column-major" and not target["encoding"]["guess"]
    assert "relative, column-major" in target["source"]
    assert len(entries) == 12
    for entry in entries:
        label_map = Path(entry["label_path"])
        assert label_map.parent == tmp_path / "Datapath" / "labelmaps"
        sop = Path(entry["image_path"]).name[:-len(".dcm")]
        data = np.asarray(Image.open(label_map))
        assert np.array_equal(data, truth[sop].astype(np.uint8)), sop   # the round trip
        assert entry["labels"] == ["pneumothorax"]
    manifest = json.loads((tmp_path / "Datapath" / "labelmaps" / "manifest.json").read_text())
    assert manifest["drawn_from_annotations"] == 12 and manifest["cases_without_finding"] == 4


def long_table(root: Path) -> dict[str, np.ndarray]:
    """UW-Madison-like: id,class,segmentation with one row per class per image (empty for
    none), absolute 1-indexed row-major runs, non-square PNG slices."""
    shape, truth, rows = (30, 44), {}, ["id,class,segmentation"]
    rng = np.random.default_rng(3)
    for i in range(10):
        stem = f"case{i // 2}_day1_slice_{i:04d}"
        organs = {"stomach": blob(shape, 8, 10 + i, 5, 7),
                  "large_bowel": blob(shape, 22, 30, 6, 10) if i % 2 else None,
                  "small_bowel": blob(shape, 20, 28, 2, 3) if i % 3 == 0 else None}
        label = np.zeros(shape, np.uint8)
        for value, name in ((1, "large_bowel"), (3, "stomach"), (2, "small_bowel")):
            if organs[name] is not None:
                label[organs[name]] = value            # the small bowel lies over the large
        truth[stem] = label
        image = picture(shape, [m for m in organs.values() if m is not None], i)
        folder = root / "train" / f"case{i // 2}" / "scans"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{stem}.png")
        for name in ("large_bowel", "small_bowel", "stomach")[::1 if rng.random() < .5 else -1]:
            mask = organs[name]
            rows.append(f"{stem},{name},{absolute_row_major(mask) if mask is not None else ''}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    return truth


def test_absolute_row_major_long_table_with_a_class_column(settings, store, tmp_path):
    root = tmp_path / "gi"
    truth = long_table(root)
    result, card, entries = register_and_index(
        settings, store, root, "GI tract", "MRI slices of the GI tract; organ masks as "
        "run-length encoded segmentation in train.csv.", tmp_path / "dp")
    assert card.tasks[0] == "segmentation"
    assert card.classes == ["large_bowel", "small_bowel", "stomach"] and card.num_samples == 10
    encoding = card.targets[0]["encoding"]
    assert (encoding["relative"], encoding["first_index"], encoding["order"]) == \
        (False, 1, "row-major")
    assert "compact blobs" in encoding["order_by"]
    for entry in entries:
        data = np.asarray(Image.open(entry["label_path"]))
        assert np.array_equal(data, truth[Path(entry["image_path"]).stem])


def test_encoding_is_told_by_the_masks_not_by_the_file():
    """Non-square masks decoded in the wrong order come out as stripes; relative starts fall
    inside the previous run."""
    shape = (20, 33)
    masks = [blob(shape, 8 + k, 12 + k, 4, 6) for k in range(4)]
    cells = [parse_runs(absolute_row_major(m)) for m in masks]
    chosen = choose_encoding(cells, [([c], shape, None) for c in cells])
    assert (chosen["relative"], chosen["order"]) == (False, "row-major")
    cells = [parse_runs(relative_column_major(m)) for m in masks]
    chosen = choose_encoding(cells, [([c], shape, None) for c in cells])
    assert (chosen["relative"], chosen["order"]) == (True, "column-major")
    assert np.array_equal(decode([cells[0]], shape, chosen), masks[0])
    said = choose_encoding(cells, [], "masks in row-major order")
    assert said["order"] == "row-major" and said["order_by"] == "the description says so"


def test_bad_runs_are_refused_with_the_line_and_what_to_do(settings, store, tmp_path):
    root = tmp_path / "bad"
    siim_like(root)
    table = root / "train-rle.csv"
    lines = table.read_text().splitlines()
    uid = lines[3].split(",")[0]
    lines[3] = f"{uid}, 5 7 9"
    table.write_text("\n".join(lines) + "\n")
    with pytest.raises(ScanError) as info:
        scan_folder(root, "pneumothorax masks run-length encoded in train-rle.csv")
    assert "train-rle.csv line 4" in str(info.value) and "start length" in str(info.value)

    lines[3] = f"{uid}, 2200 400"                 # past the last of 48 x 48 pixels
    table.write_text("\n".join(lines) + "\n")
    before = tree_digest(root)
    result = register_dataset(settings, store, str(root), "Bad runs",
                              "pneumothorax masks run-length encoded in train-rle.csv")
    assert result["status"] == "invalid"
    assert any("train-rle.csv line 4" in e and "2304" in e for e in result["errors"]), \
        result["errors"]
    scan = scan_folder(root, "pneumothorax masks run-length encoded in train-rle.csv")
    with pytest.raises(IndexBuildError, match="line 4"):
        write_list_index(scan, tmp_path / "dp", "segmentation")
    assert tree_digest(root) == before


# ----------------------------------------------------------------------------- outlines

def aperio_xml(polygons: list[list[tuple[float, float]]], negative: set[int] = frozenset(),
               layer: str = "") -> str:
    regions = []
    for k, points in enumerate(polygons, start=1):
        vertices = "".join(f'<Vertex X="{x}" Y="{y}" Z="0"/>' for x, y in points)
        regions.append(f'<Region Id="{k}" Type="0" NegativeROA="{int(k in negative)}" '
                       f'Text=""><Attributes/><Vertices>{vertices}</Vertices></Region>')
    return ('<?xml version="1.0" encoding="UTF-8"?><Annotations MicronsPerPixel="0.25">'
            f'<Annotation Id="1" Name="{layer}" Type="4"><Attributes><Attribute '
            'Name="Description" Id="0" Value=""/></Attributes><Regions>'
            '<RegionAttributeHeaders/>' + "".join(regions) + '</Regions><Plots/></Annotation>'
            '</Annotations>')


def square(x0, y0, side):
    return [(x0, y0), (x0 + side, y0), (x0 + side, y0 + side), (x0, y0 + side)]


def test_aperio_xml_outlines_beside_tiff_tiles(settings, store, tmp_path):
    """Training tiles in 'Tissue Images/' with their XML in 'Annotations/', test tiles with
    their XML side by side; one polygon per nucleus, a hole cut by a negative region."""
    root = tmp_path / "nuclei"
    rng = np.random.default_rng(0)
    for split, n in (("Training Data", 6), ("TestData", 3)):
        for i in range(n):
            stem = f"TCGA-{split[:2]}-{i:04d}-01Z-00-DX1"
            circle = np.linspace(0, 2 * np.pi, 24, endpoint=False)
            polygons = [square(8 + 3 * i, 10, 60),
                        [(110 + 8 * np.cos(a), 100 + 8 * np.sin(a)) for a in circle],
                        square(20 + 3 * i, 30, 14)]                # a hole in the square
            image = rng.integers(150, 220, (128, 140, 3), dtype=np.uint8)
            folder = root / split
            tif = folder / ("Tissue Images" if n == 6 else "") / f"{stem}.tif"
            xml = folder / ("Annotations" if n == 6 else "") / f"{stem}.xml"
            tif.parent.mkdir(parents=True, exist_ok=True)
            xml.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(tif)
            xml.write_text(aperio_xml(polygons, negative={3}))
    result, card, entries = register_and_index(
        settings, store, root, "Nuclei", "H&E tiles; every nucleus outlined by hand.",
        tmp_path / "dp")
    assert card.tasks[0] == "segmentation" and card.classes == ["nucleus"]
    assert card.num_samples == 9 and card.targets[0]["id"] == "drawn_masks"
    for entry in entries:
        data = np.asarray(Image.open(entry["label_path"]))
        assert data.shape == (128, 140) and set(np.unique(data)) == {0, 1}
        # a 60 x 60 square less a 14 x 14 hole, and a 24-gon of radius 8 (area ~ 198):
        # pixels on an outline are filled (skimage.draw), a few % over the area
        expected = 60 * 60 - 14 * 14 + 12 * 64 * np.sin(2 * np.pi / 24)
        assert abs(int(data.sum()) - expected) < 0.05 * expected, int(data.sum())


def test_aperio_layers_name_the_classes(tmp_path):
    path = tmp_path / "a.xml"
    path.write_text(aperio_xml([square(1, 1, 4)], layer="Epithelial"))
    regions = read_aperio(path)[""]
    assert [r.label for r in regions] == ["Epithelial"] and regions[0].kind == "polygon"


def cvat(images: dict[str, list[str]]) -> str:
    body = "".join(f'<image id="{k}" name="{name}" width="40" height="30">{"".join(shapes)}'
                   "</image>" for k, (name, shapes) in enumerate(images.items()))
    return ('<?xml version="1.0" encoding="utf-8"?><annotations><version>1.1</version><meta>'
            '<task><labels><label><name>polyp</name></label><label><name>instrument</name>'
            f'</label></labels></task></meta>{body}</annotations>')


def test_cvat_xml_polygons_and_masks(settings, store, tmp_path):
    root = tmp_path / "colon"
    images = {}
    for i in range(8):
        name = f"frames/video{i // 4}/frame_{i:03d}.png"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((30, 40), 120 + i, np.uint8)).save(path)
        shapes = [f'<polygon label="polyp" occluded="0" points="{5 + i},5;{25 + i},5;'
                  f'{25 + i},20;{5 + i},20" z_order="0"/>',
                  '<box label="polyp" xtl="1" ytl="1" xbr="3" ybr="3"/>']
        if i % 2:
            # a 4 x 3 box at (30, 2): 5 background, 4 instrument, 3 background
            shapes.append('<mask label="instrument" rle="5, 4, 3" left="30" top="2" '
                          'width="4" height="3" z_order="1"/>')
        images[name] = shapes
    (root / "annotations.xml").write_text(cvat(images))
    result, card, entries = register_and_index(settings, store, root, "Colon frames",
                                               "Colonoscopy frames with outlines.",
                                               tmp_path / "dp")
    assert card.classes == ["instrument", "polyp"] and card.num_samples == 8
    for entry in entries:
        i = int(Path(entry["image_path"]).stem.split("_")[1])
        data = np.asarray(Image.open(entry["label_path"]))
        polyp = np.zeros((30, 40), bool)
        polyp[5:21, 5 + i:26 + i] = True                # the outline's pixels are filled too
        assert np.array_equal(data == 2, polyp)
        instrument = np.zeros((30, 40), bool)
        if i % 2:   # counts 5, 4, 3 row by row in the 4 x 3 box at (30, 2)
            instrument[2:5, 30:34] = (np.arange(12) >= 5).reshape(3, 4) & \
                (np.arange(12) < 9).reshape(3, 4)
        assert np.array_equal(data == 1, instrument)


@pytest.mark.slow
def test_a_model_is_built_from_run_length_masks_in_autopilot(tmp_path_factory, tmp_path):
    """The request through the crew in autopilot, one epoch: the job indexes the drawn label
    maps, trains and is scored by the system's evaluator; the folder is left as it was."""
    from conftest import approve_with_epochs, crew_home, run_until_approval
    from core.jobs.lifecycle import create_job
    from core.jobs.workspace import JobWorkspace

    root = tmp_path / "ptx"
    siim_like(root)
    with pytest.MonkeyPatch.context() as mp:
        _home, settings, store = crew_home(tmp_path_factory, mp, "drawn-home")
        result = register_dataset(settings, store, str(root), "PTX runs",
                                  "Chest radiographs. The pneumothorax masks are run-length "
                                  "encoded in train-rle.csv; -1 means no pneumothorax.")
        assert result["status"] == "registered", result["errors"]
        before = tree_digest(root)
        job_id = create_job(settings, store, "segment pneumothorax on chest X-rays",
                            "autopilot", auto_approve=False)
        worker, outcome = run_until_approval(settings, store, job_id)
        approve_with_epochs(settings, store, job_id, worker, 1, timeout=600)
        assert outcome["status"] == "succeeded", (outcome.get("error"), outcome.get("reasons"))
        assert outcome["dataset"] == "PTX runs" and "dice" in outcome["metrics"]
        ws = JobWorkspace(settings.jobs_dir / job_id)
        entries = json.loads(ws.train_index.read_text())
        assert all("/labelmaps/" in e["label_path"] for e in entries)
        assert tree_digest(root) == before


def test_labelme_polygons_are_a_segmentation_target_beside_their_boxes(tmp_path):
    """labelme JSON sidecars whose shapes are polygons: the outlines are masks (the boxes
    reading stays on the card as another target)."""
    root = tmp_path / "skin"
    for i in range(6):
        (root / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((40, 50, 3), 200, np.uint8)).save(root / "images" / f"l{i}.jpg")
        shapes = [{"label": "lesion", "shape_type": "polygon",
                   "points": [[10, 8], [30 + i, 8], [30 + i, 28], [10, 28]]}]
        (root / "images" / f"l{i}.json").write_text(json.dumps(
            {"shapes": shapes, "imagePath": f"l{i}.jpg", "imageHeight": 40, "imageWidth": 50}))
    scan = scan_folder(root, "Dermoscopy images with each lesion outlined for segmentation.")
    assert scan.details["interpretation"]["reader"] == "drawn_masks"
    assert scan.task == "segmentation" and scan.classes == ["lesion"]
    assert {t["task"] for t in scan.details["targets"]} >= {"segmentation", "anomaly_detection"}
    write_list_index(scan, tmp_path / "dp", "segmentation", test_fraction=0.34)
    data = np.asarray(Image.open(tmp_path / "dp" / "labelmaps" / "l2.png"))
    assert int(data.sum()) == 21 * 23                  # rows 8..28, columns 10..32
