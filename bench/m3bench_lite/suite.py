"""The M3Bench-lite suite: for each of the paper's 14 datasets and the 12 layout families, a
synthetic stand-in (generator),
its datacard text (written in our own words, naming label columns, code meanings and caps as
the paper's cards do), the request a clinician would type, and the floor a run must reach to
count as a success (the paper's "test-set performance in an acceptable range")."""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.demo import m3bench_diagnosis as diagnosis, m3bench_reports as reports
from core.demo import m3bench_head_xray as head_xray, m3bench_torso as torso
from core.demo import layout_families
from core.datasets.datacards import Datacard, parse_datacard

SUITE = "m3bench-lite"


@dataclass(frozen=True)
class Floor:
    """``metric op value`` or, with ``reference``, ``metric op metrics[reference]``."""
    metric: str
    op: str = ">="
    value: float | None = None
    reference: str | None = None

    def passed(self, metrics: dict) -> bool:
        got = metrics.get(self.metric)
        bar = metrics.get(self.reference) if self.reference else self.value
        if not isinstance(got, (int, float)) or not isinstance(bar, (int, float)):
            return False
        if got != got or bar != bar:  # NaN never passes
            return False
        return {">=": operator.ge, ">": operator.gt}[self.op](got, bar)

    def text(self) -> str:
        return f"{self.metric} {self.op} {self.reference or self.value}"


@dataclass(frozen=True)
class BenchDataset:
    name: str                 # datacard name
    folder: str               # folder under the benchmark data folder
    paper_name: str           # the M3Bench dataset it stands in for
    task: str                 # datacard task
    template: str             # training template the crew should pick
    modality: str
    anatomy: str
    dimension: str
    build: Callable[..., Path]
    description: str
    request: str
    floor: Floor
    classes: tuple[str, ...] = field(default_factory=tuple)
    # the volumes are Python pickles (KneeMRI's .pck): reading them runs code, so registration
    # must be told the source is trusted; the bench wrote them itself, so it is
    allow_pickle: bool = False

    def datacard(self, path: str | Path) -> Datacard:
        """The card as the catalogue would hold it (structure, plus the request and floor)."""
        return parse_datacard({
            "dataset name": self.name, "dataset description": self.description,
            "dataset path": str(path), "tasks": [self.task], "modality": self.modality,
            "anatomy": self.anatomy, "dimension": self.dimension, "classes": list(self.classes),
            "source": "demo", "provenance": f"M3Bench-lite synthetic stand-in for "
            f"{self.paper_name}; not patient data", "benchmark_request": self.request,
            "benchmark_floor": self.floor.text(), "allow_pickle": self.allow_pickle})


AUC = Floor("auc", ">=", 0.75)
DICE = Floor("dice", ">=", 0.5)
ROUGE = Floor("rouge_l", ">", reference="baseline_rouge_l")

DATASETS: list[BenchDataset] = [
    BenchDataset(
        "ADNI-lite", "ADNI", "ADNI", "diagnosis", "diagnosis", "MRI", "brain", "3D",
        diagnosis.make_adni,
        "Synthetic stand-in for ADNI: 3D T1-weighted brain MRI volumes for Alzheimer's disease "
        "staging, each stored as a PyTorch tensor file tensors/<Image Data ID>.pt (axes z, y, x). "
        "The collection table ADNI1_Complete_1Yr_1.5T.csv has one row per volume: 'Image Data "
        "ID' names the tensor file, 'Group' is the diagnosis (CN = cognitively normal, MCI = "
        "mild cognitive impairment, AD = Alzheimer's disease) and 'Subject' identifies the "
        "participant; most participants have several visits, so keep each subject on one side "
        "of the split. Use at most 100 volumes for training and 30 for testing.",
        "Classify Alzheimer's disease, mild cognitive impairment and cognitively normal "
        "subjects from 3D brain MRI", AUC, ("AD", "CN", "MCI")),
    BenchDataset(
        "KneeMRI-lite", "KneeMRI", "KneeMRI", "diagnosis", "diagnosis", "MRI", "knee", "3D",
        diagnosis.make_knee_mri,
        "Synthetic stand-in for KneeMRI: sagittal 3D knee MRI volumes saved as pickled NumPy "
        "arrays (volumes/<examId>-<seriesNo>.pck, axes slice, row, column). metadata.csv lists "
        "one row per volume; 'volumeFilename' is the file and 'aclDiagnosis' the anterior "
        "cruciate ligament label, an integer code: 0 = healthy, 1 = partial tear, 2 = complete "
        "rupture. Healthy knees are the majority, so balance the classes or weight them. Use at "
        "most 90 volumes for training and 24 for testing.",
        "Diagnose anterior cruciate ligament tears on knee MRI", AUC,
        ("healthy", "partial tear", "complete rupture"), allow_pickle=True),
    BenchDataset(
        "CC-CCII-lite", "CC-CCII", "CC-CCII", "diagnosis", "diagnosis", "CT", "chest", "3D",
        diagnosis.make_cc_ccii,
        "Synthetic stand-in for CC-CCII: 3D chest CT scans for COVID-19 pneumonia diagnosis. "
        "Three class folders, NCP (novel coronavirus pneumonia), CP (common pneumonia) and "
        "Normal; inside each, one folder per patient ID holding one folder per scan ID with the "
        "scan's axial slices as PNG files (0000.png, 0001.png, ...). A scan folder is one 3D "
        "sample; some patients have two scans, so split by patient folder.",
        "Classify chest CT scans as novel coronavirus pneumonia (NCP), common pneumonia (CP) "
        "or normal", AUC, ("CP", "NCP", "Normal")),
    BenchDataset(
        "CT-Kidney-lite", "CT-Kidney", "CT-Kidney", "diagnosis", "diagnosis", "CT", "abdomen",
        "2D", diagnosis.make_ct_kidney,
        "Synthetic stand-in for the CT Kidney dataset: 2D axial abdominal CT slices through the "
        "kidneys as RGB JPEG files, sorted into four class folders: Normal, Cyst, Tumor and "
        "Stone (files named like 'Cyst- (12).jpg'). The file names carry no patient ID. Use at "
        "most 100 images for training and 30 for testing.",
        "Classify kidney CT images as normal, cyst, tumor or stone", AUC,
        ("Cyst", "Normal", "Stone", "Tumor")),
    BenchDataset(
        "COVID19-lite", "COVID19", "COVID19", "anomaly_detection", "segmentation", "CT",
        "chest", "3D", torso.make_covid19,
        "Synthetic stand-in for the COVID-19 CT lung infection segmentation set: 3D chest CT "
        "volumes (NIfTI, Hounsfield units) in images/ with voxel masks of the same name in "
        "segmentation_masks/; labels.json lists the mask labels in order (value 1 = infection, "
        "ground-glass opacities and consolidation in the lungs). Some volumes are stored in LPS "
        "orientation.",
        "Segment COVID-19 lung infection lesions on chest CT", DICE, ("infection",)),
    BenchDataset(
        "INSTANCE2022-lite", "INSTANCE2022", "INSTANCE2022", "anomaly_detection",
        "segmentation", "CT", "brain", "3D", head_xray.make_instance2022,
        "Synthetic stand-in for INSTANCE 2022: non-contrast head CT volumes of the brain "
        "(NIfTI, Hounsfield units, 5 mm slices) in images/ with masks of the same name in "
        "masks/; labels.json gives the label order (value 1 = intracranial haemorrhage). The "
        "task is to segment the bleed.",
        "Segment intracranial hemorrhage on brain CT", DICE, ("intracranial haemorrhage",)),
    BenchDataset(
        "MSD-Pancreas-lite", "MSD_Pancreas", "MSD Pancreas", "anomaly_detection",
        "segmentation", "CT", "abdomen", "3D", torso.make_msd_pancreas,
        "Synthetic stand-in for the Medical Segmentation Decathlon pancreas task: portal-venous "
        "abdominal CT volumes (NIfTI, Hounsfield units) in images/ (pancreas_NNN.nii.gz) with "
        "masks of the same name in masks/; labels.json lists two labels in order: value 1 = "
        "pancreas, value 2 = pancreatic tumour (a hypodense mass). Half of the volumes are "
        "stored in LPS orientation.",
        "Segment the pancreas and pancreatic tumours on abdominal CT",
        Floor("dice", ">=", 0.4), ("pancreas", "pancreatic tumour")),
    BenchDataset(
        "ChestX-Det10-lite", "ChestX-Det10", "ChestX-Det10", "anomaly_detection",
        "segmentation", "X-ray", "chest", "2D", head_xray.make_chestx_det10,
        "Synthetic stand-in for ChestX-Det10: frontal chest X-rays (2D PNG, images/<id>.png) "
        "with pixel masks of abnormal findings in masks/<id>.png; labels.json lists the labels "
        "in order (value 1 = Effusion, value 2 = Mass). Many images show one finding, some both, "
        "some none.",
        "Segment pleural effusion and masses on chest X-rays", DICE, ("Effusion", "Mass")),
    BenchDataset(
        "VerSe-lite", "VerSe", "VerSe", "segmentation", "segmentation", "CT", "spine", "3D",
        torso.make_verse,
        "Synthetic stand-in for VerSe: lumbar spine CT volumes (NIfTI, Hounsfield units) in "
        "images/ named sub-verseNNN_ct.nii.gz, with vertebra masks in masks/ named "
        "sub-verseNNN_seg-vert_msk.nii.gz (the same subject ID). labels.json lists the labels "
        "in order: values 1-5 = vertebrae L1, L2, L3, L4, L5; the sacrum and T12 with its ribs "
        "are visible but unlabelled.",
        "Segment the lumbar vertebrae L1 to L5 on spine CT", Floor("dice", ">=", 0.4),
        ("L1", "L2", "L3", "L4", "L5")),
    BenchDataset(
        "L2R-OASIS-lite", "L2R-OASIS", "L2R-OASIS", "segmentation", "segmentation", "MRI",
        "brain", "3D", head_xray.make_l2r_oasis,
        "Synthetic stand-in for the Learn2Reg OASIS brain set: skull-stripped, affinely aligned "
        "T1-weighted brain MRI volumes (NIfTI) in images/ (OASIS_NNNN_0000.nii.gz) with tissue "
        "masks of the same name in masks/; labels.json lists four labels in order: 1 = cortex, "
        "2 = subcortical grey matter, 3 = white matter, 4 = CSF.",
        "Segment brain tissues (cortex, subcortical grey matter, white matter, CSF) on brain "
        "MRI", DICE, head_xray.OASIS_LABELS),
    BenchDataset(
        "BTCV-lite", "BTCV", "BTCV", "segmentation", "segmentation", "CT", "abdomen", "3D",
        torso.make_btcv,
        "Synthetic stand-in for BTCV (Beyond the Cranial Vault): contrast abdominal CT volumes "
        "(NIfTI, Hounsfield units). Training/img holds the scans (imgNNNN.nii.gz) and "
        "Training/label the label maps (labelNNNN.nii.gz, same number); Testing/img holds scans "
        "without labels, so the test set must come from the training cases. labels.json lists "
        "the organs in mask-value order: 1 = spleen, 2 = right kidney, 3 = left kidney, 4 = "
        "liver. Half of the volumes are stored in LPS orientation.",
        "Segment the spleen, kidneys and liver on abdominal CT", DICE,
        torso.BTCV_LABELS),
    BenchDataset(
        "CT-RATE-lite", "CT-RATE", "CT-RATE", "report_generation", "report_generation", "CT",
        "chest", "3D", reports.make_ct_rate,
        "Synthetic stand-in for CT-RATE: 3D chest CT volumes (NIfTI, Hounsfield units) in "
        "nested folders dataset/<split>/<patient>/<scan>/<reconstruction>.nii.gz, each with the "
        "radiology report written for its scan. train.json and test.json are lists of "
        "{image_path (relative to the dataset folder), finding, impression}; keep their split. "
        "A patient may have several scans and reconstructions. Use at most 1000 volumes for "
        "training and 200 for testing.",
        "Generate radiology reports for 3D chest CT volumes", ROUGE),
    BenchDataset(
        "RadGenome-Brain-lite", "RadGenome-Brain", "RadGenome-Brain", "report_generation",
        "report_generation", "MRI", "brain", "3D", reports.make_radgenome_brain,
        "Synthetic stand-in for RadGenome-Brain MRI: 3D brain MRI volumes (NIfTI) in images/ "
        "with radiology reports in reports_train.json and reports_test.json, lists of {image "
        "(file name in images/), finding, impression}; keep their split.",
        "Write radiology reports for brain MRI scans", ROUGE),
    BenchDataset(
        "IU-Xray-lite", "IU-Xray", "IU-Xray", "report_generation", "report_generation", "X-ray",
        "chest", "2D", reports.make_iu_xray,
        "Synthetic stand-in for IU-Xray (Indiana University chest X-rays): PNG radiographs in "
        "images/images_normalized/ with one table, indiana_reports.csv: 'filename' names the "
        "image, 'uid' the study (a frontal and a lateral view per study, which share one "
        "report), and 'findings' and 'impression' hold the report; a few studies have no "
        "findings text.",
        "Write radiology reports for frontal and lateral chest X-ray studies", ROUGE),
]

# The layout families (core.demo.layout_families): ordinary folders in the layouts public
# datasets ship in (Pascal VOC, YOLO, JSON sidecars, report.txt per study, multi-sheet Excel,
# 0/255 TIFF masks, 3D Slicer .seg.nrrd, file-name tokens, MedMNIST .npz, Kermany chest_xray,
# nnU-Net raw, TCIA DICOM + clinical CSV). M3Bench-lite is the paper's 14 and these 12, all
# registered together: the Task Manager chooses among all 26 cards. "paper" and
# "layout-families" select either part alone (only that part is registered).
FAMILY_FLOORS = {"detection": Floor("map50", ">=", 0.5), "diagnosis": AUC, "segmentation": DICE,
                 "report_generation": ROUGE}
FAMILY_FLOOR_OVERRIDES = {   # two labels, one a small lesion (as MSD Pancreas above)
    "slicer_seg": Floor("dice", ">=", 0.4), "nnunet_raw": Floor("dice", ">=", 0.4)}
FAMILIES: list[BenchDataset] = [
    BenchDataset(f.name, f.folder, f.key, f.reading.task, f.reading.template, f.modality,
                 f.anatomy, f.dimension, f.generate, f.description, f.request,
                 FAMILY_FLOOR_OVERRIDES.get(f.key, FAMILY_FLOORS[f.reading.template]),
                 f.reading.classes)
    for f in layout_families.FAMILIES]
SUITE_DATASETS = {SUITE: DATASETS + FAMILIES, "paper": DATASETS, "layout-families": FAMILIES}
SUITES = tuple(SUITE_DATASETS)

BY_NAME = {d.name.lower(): d for d in DATASETS}


def datasets_of(suite: str = SUITE) -> list[BenchDataset]:
    if suite not in SUITE_DATASETS:
        raise ValueError(f"unknown suite {suite!r}; available: {', '.join(SUITE_DATASETS)}")
    return SUITE_DATASETS[suite]


def select(only: str | list[str] | None, suite: str = SUITE) -> list[BenchDataset]:
    """Datasets of ``suite`` by datacard name, folder or paper name (the family key for the
    layout families; comma-separated, case-insensitive), in the suite's order."""
    datasets = datasets_of(suite)
    if not only:
        return list(datasets)
    wanted = [w.strip().lower() for w in (only.split(",") if isinstance(only, str) else only)
              if w.strip()]
    chosen = []
    for word in wanted:
        found = [d for d in datasets if word in (d.name.lower(), d.folder.lower(),
                                                 d.paper_name.lower())]
        if not found:
            names = ", ".join(d.paper_name for d in datasets)
            label = "M3Bench-lite dataset" if suite == SUITE else f"{suite} suite dataset"
            raise ValueError(f"no {label} {word!r}; choose from {names}")
        chosen.extend(d for d in found if d not in chosen)
    return [d for d in datasets if d in chosen]


def generate(data_dir: str | Path, only: str | list[str] | None = None,
             scale: float = 1.0, suite: str = SUITE) -> dict[str, Path]:
    """Write the chosen datasets of ``suite`` under ``data_dir`` (existing complete ones are
    kept)."""
    data_dir = Path(data_dir)
    return {d.name: d.build(data_dir / d.folder, scale=scale) for d in select(only, suite)}
