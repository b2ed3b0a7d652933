"""Index files in the paper's format, from a scan, with a leakage-free split
(core.datasets.splitting).

Segmentation, detection and report-generation indexes are lists of dicts (write_list_index;
formats in ml_templates/README.md). Diagnosis index (``Datapath/``):

* ``train.json`` / ``test.json``: ``{image_path: [label, ...]}`` — absolute paths into the
  read-only dataset; an image is a file, or a folder of 2D slices forming one 3D scan;
* ``label_dict.json``: ``{label: index}`` from 0, labels sorted;
* ``split.json``: how the split was made — grouping key (``patient_key``: its source, rule,
  whether it is a guess, how many images share a patient, the largest group; ``warnings`` when
  it is a guess or missing), seed, fractions, the caps applied (and the datacard sentence each
  came from), image counts per class on each side, which groups went where, and each indexed
  image's group (so training can hold out validation patients too).

An external test set (a trained model scored on another dataset) is indexed by the same scan,
unsplit: ``write_test_index``.

A segmentation dataset with one binary mask file per structure, or with masks drawn as
annotations (runs in a table, outlines in XML/JSON), gets one label map per indexed case,
merged or drawn into ``<Datapath>/labelmaps/`` (core.datasets.label_maps); the index names
those maps as ``label_path``.

May import: core.datasets.splitting, core.datasets.split_caps, core.datasets.datacards,
core.datasets.dicom_series, core.datasets.label_maps, core.datasets.layouts.types.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.datacards import write_json_atomic
from core.datasets.dicom_series import write_series_manifests
from core.datasets.label_maps import LabelMapError, write_label_maps
from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.split_caps import SplitCaps
from core.datasets.splitting import (IndexBuildError, SplitResult, class_counts, make_split,
                                     sample_key)


def _groups_map(split: SplitResult) -> dict[str, str]:
    """Each indexed image's group, keyed as the index names the image; a channel list is also
    keyed by its first file (templates look cases up either way)."""
    groups: dict[str, str] = {}
    for s in split.train + split.test:
        groups[sample_key(s)] = s.group
        if isinstance(s.image, list) and s.image:
            groups.setdefault(s.image[0], s.group)
    return groups


def split_record(scan: ScanResult, split: SplitResult) -> dict:
    """What split.json holds (see the module docstring)."""
    multi = any(s.labels is not None for s in scan.samples)
    counts = {"train": class_counts(split.train, multi), "test": class_counts(split.test, multi)}
    record = {"grouping_key": scan.group_source, "dataset": scan.root, **split.info,
              "counts": counts,
              "num_images": {"train": len(split.train), "test": len(split.test)},
              "groups": _groups_map(split)}
    record["warnings"] = list(split.info.get("warnings", []))  # [] when the key is known
    return record


def _summary(datapath: Path, scan: ScanResult, split: SplitResult, record: dict) -> dict:
    summary = {"datapath": str(datapath), "num_train": len(split.train),
               "num_test": len(split.test), "classes": scan.classes, "counts": record["counts"],
               "split_method": split.info["method"], "grouping_key": record["grouping_key"],
               "num_train_groups": len(split.info["train_groups"]),
               "num_test_groups": len(split.info["test_groups"])}
    key = record.get("patient_key") or {}
    summary["patient_key"] = {k: key[k] for k in ("source", "guess", "num_groups",
                                                  "images_sharing_a_patient") if k in key}
    summary["warnings"] = record["warnings"]
    if "caps" in split.info:
        caps = split.info["caps"]
        summary["caps"] = {k: caps[k] for k in ("train", "test", "total", "per_class",
                                                 "balanced", "images_left_out")}
    return summary


def _check_both_sides(scan: ScanResult, split: SplitResult) -> None:
    if not split.train or not split.test:
        raise IndexBuildError(f"the split left {len(split.train)} training and "
                              f"{len(split.test)} test images; each side needs at least one. "
                              "Relax the caps in the datacard or add patients")


def write_diagnosis_index(scan: ScanResult, datapath: str | Path, test_fraction: float = 0.2,
                          seed: int = 42, keep_existing_split: bool = True,
                          caps: SplitCaps | str | None = None) -> dict:
    """Write train/test/label_dict/split JSON files; returns a summary for the caller."""
    if len(scan.classes) < 2:
        raise IndexBuildError(f"diagnosis needs at least two classes; found {scan.classes}. "
                              "Add a folder for each class.")
    scan = write_series_manifests(scan, datapath)  # DICOM series sharing a folder -> manifests
    split = make_split(scan, test_fraction, seed, keep_existing_split, caps)
    _check_both_sides(scan, split)
    datapath = Path(datapath)
    label_dict = {label: i for i, label in enumerate(scan.classes)}
    train = {sample_key(s): s.label_list() for s in split.train}   # channels: JSON text
    test = {sample_key(s): s.label_list() for s in split.test}
    record = split_record(scan, split)
    write_json_atomic(datapath / "label_dict.json", label_dict)
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", record)
    return _summary(datapath, scan, split, record)


def _entry(sample: Sample, template: str, classes: list[str],
           label_values: list[int] | None = None) -> dict:
    if template == "segmentation":
        entry = {"image_path": sample.image, "label_path": sample.extra["label_path"],
                 "labels": classes}
        # labels[i] is stored as mask value label_values[i]: the case's own values (a 3D Slicer
        # file numbers its segments itself) or the dataset's (0/255 masks)
        values = sample.extra.get("label_values") or label_values
        if values:
            entry["label_values"] = list(values)
        return entry
    if template == "detection":
        return {"image_path": sample.image, "boxes": sample.extra.get("boxes", []),
                "labels": sample.extra.get("labels", [])}
    return {"image_path": sample.image, "findings": sample.extra.get("findings", ""),
            "impression": sample.extra.get("impression", "")}


def write_list_index(scan: ScanResult, datapath: str | Path, template: str,
                     test_fraction: float = 0.2, seed: int = 42,
                     keep_existing_split: bool = True,
                     caps: SplitCaps | str | None = None) -> dict:
    """Segmentation / detection / report generation index: lists of dicts (see
    ml_templates/README.md), plus split.json (and label_dict.json for detection)."""
    if template not in ("segmentation", "detection", "report_generation"):
        raise IndexBuildError(f"no list index for template {template!r}")
    if len(scan.samples) < 4:
        raise IndexBuildError(f"only {len(scan.samples)} cases; at least 4 are needed to train "
                              "and test")
    scan = write_series_manifests(scan, datapath)  # DICOM series sharing a folder -> manifests
    split = make_split(scan, test_fraction, seed, keep_existing_split, caps)
    _check_both_sides(scan, split)
    datapath = Path(datapath)
    # cases with one mask file per structure -> one label map each (others unchanged)
    merged, maps = _label_maps(split.train + split.test, scan.classes, datapath)
    split.train, split.test = merged[:len(split.train)], merged[len(split.train):]
    values = scan.details.get("label_values")
    train = [_entry(s, template, scan.classes, values) for s in split.train]
    test = [_entry(s, template, scan.classes, values) for s in split.test]
    if template == "detection":
        write_json_atomic(datapath / "label_dict.json",
                          {label: i for i, label in enumerate(scan.classes)})
    record = split_record(scan, split)
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", record)
    summary = _summary(datapath, scan, split, record)
    if maps:
        summary["label_maps"] = maps
    return summary


def _label_maps(samples: list[Sample], labels: list[str], datapath: Path):
    try:
        return write_label_maps(samples, labels, datapath)
    except (LabelMapError, OSError) as exc:
        drawn = any(s.extra.get("drawing") for s in samples)
        raise IndexBuildError(
            f"the {'drawn annotations' if drawn else 'structure masks'} cannot be made into "
            f"label maps: {exc}" + ("" if drawn else ". Each structure's mask must be on its "
                                    "image's grid")) from exc


def write_test_index(scan: ScanResult, datapath: str | Path, template: str) -> dict:
    """Every case of the scan as a test case, in the template's index format (an external test
    set: not split, so its patient key does not matter and no cap applies): ``test.json`` and a
    ``split.json`` that says so. The label dictionary is the caller's (the model's)."""
    if not scan.samples:
        raise IndexBuildError(f"{scan.root} holds no case the {template} template can read")
    scan = write_series_manifests(scan, datapath)  # DICOM series sharing a folder -> manifests
    datapath = Path(datapath)
    if template == "diagnosis":
        test = {sample_key(s): s.label_list() for s in scan.samples}
    else:
        samples, _ = _label_maps(scan.samples, scan.classes, datapath)
        values = scan.details.get("label_values")
        test = [_entry(s, template, scan.classes, values) for s in samples]
    multi = any(s.labels is not None for s in scan.samples)
    record = {"method": "none: every case is a test case (external test set)",
              "grouping_key": "not used", "dataset": scan.root,
              "counts": {"test": class_counts(scan.samples, multi)},
              "num_images": {"train": 0, "test": len(scan.samples)}}
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", record)
    return {"datapath": str(datapath), "num_test": len(scan.samples), "classes": scan.classes,
            "counts": record["counts"], "layout": scan.layout, "multi_label": multi}


def write_index(scan, datapath: Path, template: str, test_fraction: float, seed: int,
                keep_existing_split: bool, caps=None) -> dict:
    """Write the template's index; ``caps`` (a SplitCaps, or the datacard description to parse)
    limits the samples used ("use at most 1000 samples for training ...")."""
    if template == "diagnosis":
        return write_diagnosis_index(scan, datapath, test_fraction, seed, keep_existing_split,
                                     caps)
    return write_list_index(scan, datapath, template, test_fraction, seed, keep_existing_split,
                            caps)
