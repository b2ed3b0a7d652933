"""Scale bench: scan and index a 100,000-image dataset, against the targets (<= 20 s, <= 1 GB).

    python -m bench.scan_scale [--files 100000] [--layouts class_folders,label_table]
                               [--workdir DIR] [--keep] [--validate] [--json]

For each layout it writes a synthetic dataset of small PNG files into a temporary folder (or
``--workdir``), then measures in a fresh subprocess (so imports and earlier runs do not blur the
numbers):

* ``class_folders``: ``CLASS/patientNNNNNN_K.png``, four imbalanced classes, 1-4 images per
  patient (the patient key is the file name's prefix);
* ``label_table``: ChestX-ray14 style, ``images/NNNNNNNN_KKK.png`` plus ``Data_Entry.csv``
  (``Image Index``, ``Finding Labels`` with ``A|B`` multi-labels and ``No Finding``,
  ``Patient ID``).

Measured: scan wall time, index writing (grouped stratified split, train/test/split JSON,
every sample: the worst case), the index gate, their sum against the 20 s target; the
process's peak resident memory (``ru_maxrss``, imports included, read before the CrewAI tools
are imported for the preview sizes) against 1 GB; and the size of the JSON the Data Engineer's
tools return (``inspect_dataset``'s bounded scan summary, ``build_index``'s summary; each at
most 8 KB). The index is then written again with caps read from a datacard sentence ("use at
most 20000 samples for training and 5000 for testing, keep classes balanced") and gated, to
show the capped split at scale. ``--validate`` also times registration's bounded validation
(not part of the target). The generated files are deleted afterwards unless ``--keep``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

TARGET_SECONDS = 20.0
TARGET_BYTES = 1 << 30
PREVIEW_LIMIT = 8192
CLASSES = {"normal": 0.5, "pneumonia": 0.3, "covid": 0.15, "tuberculosis": 0.05}
FINDINGS = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule",
            "Pneumothorax", "Hernia"]
DESCRIPTION = {
    "class_folders": "Synthetic chest X-rays in class folders, patient ID as the file name's "
                     "prefix.",
    "label_table": "Synthetic NIH-style chest X-rays with Data_Entry.csv (Finding Labels, "
                   "Patient ID).",
}
CAPS = "Use at most 20000 samples for training and 5000 for testing, keep classes balanced."


# ----------------------------------------------------------------------------- data

def _write_pngs(jobs: list[tuple[str, int]]) -> int:
    """Write 8x8 grey PNGs whose pixels depend on the seed (so no two files are identical)."""
    import numpy as np
    from PIL import Image
    for path, seed in jobs:
        pixels = np.random.default_rng(seed).integers(0, 256, (8, 8), dtype=np.uint8)
        Image.fromarray(pixels).save(path, optimize=False)
    return len(jobs)


def _write_all(jobs: list[tuple[str, int]], workers: int) -> None:
    chunks = [jobs[i:i + 2000] for i in range(0, len(jobs), 2000)]
    with Pool(workers) as pool:
        for _ in pool.imap_unordered(_write_pngs, chunks):
            pass


def make_class_folders(root: Path, files: int, seed: int = 0, workers: int = 2) -> Path:
    """Class folders with patient prefixes: ``CLASS/patientNNNNNN_K.png``."""
    rng = random.Random(seed)
    names, weights = list(CLASSES), list(CLASSES.values())
    for name in names:
        (root / name).mkdir(parents=True, exist_ok=True)
    jobs, patient = [], 0
    while len(jobs) < files:
        label = rng.choices(names, weights)[0]
        for k in range(min(rng.randint(1, 4), files - len(jobs))):
            jobs.append((str(root / label / f"patient{patient:06d}_{k}.png"), len(jobs)))
        patient += 1
    _write_all(jobs, workers)
    return root


def make_label_table(root: Path, files: int, seed: int = 0, workers: int = 2) -> Path:
    """``images/`` plus ``Data_Entry.csv`` (multi-label findings, a patient column)."""
    rng = random.Random(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    jobs, rows, patient = [], [], 0
    while len(jobs) < files:
        patient += 1
        for k in range(min(rng.randint(1, 4), files - len(jobs))):
            name = f"{patient:08d}_{k:03d}.png"
            found = [f for f in FINDINGS if rng.random() < 0.08]
            rows.append(f"{name},{'|'.join(found) or 'No Finding'},{patient},{rng.randint(20, 90)}")
            jobs.append((str(root / "images" / name), len(jobs)))
    (root / "Data_Entry.csv").write_text("Image Index,Finding Labels,Patient ID,Patient Age\n"
                                         + "\n".join(rows) + "\n")
    _write_all(jobs, workers)
    return root


MAKERS = {"class_folders": make_class_folders, "label_table": make_label_table}


# ----------------------------------------------------------------------------- measuring

def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def measure(root: Path, description: str, validate: bool) -> dict:
    """Scan, index and gate ``root`` in this process; return timings, memory, preview sizes."""
    from core.config.bootstrap import apply
    apply()  # process set-up
    from core.datasets.layouts.dispatch import scan_folder
    from core.datasets.indexing import write_index
    from core.planning.tasks import check_index, template_for
    from core.jobs.workspace import JobWorkspace

    baseline = _peak_rss_bytes()
    out: dict = {"dataset": str(root)}
    with tempfile.TemporaryDirectory(prefix="m3b-scale-job-") as job:
        ws = JobWorkspace(Path(job)).ensure()
        t0 = time.perf_counter()
        scan = scan_folder(root, description)
        t1 = time.perf_counter()
        template = template_for(scan.task, scan.layout)
        index = write_index(scan, ws.datapath, template, 0.2, 42, True, caps=description)
        t2 = time.perf_counter()
        gate = check_index(ws, template)
        t3 = time.perf_counter()
        index_bytes = sum(p.stat().st_size for p in ws.datapath.glob("*.json"))
        capped_ws = JobWorkspace(Path(job) / "capped").ensure()  # again, with caps
        capped = write_index(scan, capped_ws.datapath, template, 0.2, 42, True, caps=CAPS)
        t4 = time.perf_counter()
        capped_gate = check_index(capped_ws, template)
        peak = _peak_rss_bytes()  # before the tools (CrewAI) are imported for the previews
        from tools.data_engineer import MAX_PREVIEW_BYTES, bounded
        inspect_json = json.dumps({"ok": True, "scan": bounded(scan.summary())})
        build_json = json.dumps({"ok": True, "index": bounded(index, MAX_PREVIEW_BYTES - 1024),
                                 "gate": gate.message()})
        out.update(layout=scan.layout, task=scan.task, samples=len(scan.samples),
                   files=scan.num_files, classes=len(scan.classes),
                   groups=len({s.group for s in scan.samples}), grouping=scan.group_source,
                   train=index["num_train"], test=index["num_test"], gate=gate.message(),
                   scan_s=round(t1 - t0, 2), index_s=round(t2 - t1, 2),
                   gate_s=round(t3 - t2, 2), total_s=round(t3 - t0, 2),
                   index_json_bytes=index_bytes,
                   capped_index_s=round(t4 - t3, 2), capped_gate=capped_gate.message(),
                   capped={"train": capped["num_train"], "test": capped["num_test"],
                           "counts": capped["counts"]},
                   inspect_preview_bytes=len(inspect_json),
                   build_index_result_bytes=len(build_json),
                   unbounded_summary_bytes=len(json.dumps(scan.summary(), default=str)))
        if validate:
            from core.datasets.validation import validate as run_validation
            t5 = time.perf_counter()
            v = run_validation(scan, description)
            out.update(validate_s=round(time.perf_counter() - t5, 2),
                       validate_how=v.checked.get("how"), validate_errors=v.errors[:3])
    out.update(peak_rss_mb=round(peak / 2**20, 1), baseline_rss_mb=round(baseline / 2**20, 1))
    return out


def _child(root: Path, layout: str, validate: bool) -> dict:
    command = [sys.executable, "-m", "bench.scan_scale", "--measure", str(root),
               "--layout", layout] + (["--validate"] if validate else [])
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    if done.returncode != 0:
        raise RuntimeError(f"measuring {layout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _report(r: dict) -> str:
    time_ratio = r["total_s"] / TARGET_SECONDS
    mem_ratio = r["peak_rss_mb"] * 2**20 / TARGET_BYTES
    ok = lambda good: "ok" if good else "OVER"  # noqa: E731
    lines = [
        f"{r['layout']}: {r['files']} files -> {r['samples']} samples, {r['groups']} patients "
        f"({r['grouping']}), {r['classes']} classes; data made in {r['make_s']} s",
        f"  scan {r['scan_s']} s + index {r['index_s']} s + gate {r['gate_s']} s = "
        f"{r['total_s']} s  (target {TARGET_SECONDS:.0f} s: {time_ratio:.2f}x, "
        f"{ok(time_ratio <= 1)})",
        f"  peak RSS {r['peak_rss_mb']} MB (after imports {r['baseline_rss_mb']} MB)  "
        f"(target 1024 MB: {mem_ratio:.2f}x, {ok(mem_ratio <= 1)})",
        f"  index: train {r['train']} / test {r['test']}; {r['gate']}; index files "
        f"{r['index_json_bytes'] / 2**20:.1f} MB",
        f"  with caps ({CAPS!r}): train {r['capped']['train']} / test "
        f"{r['capped']['test']} in {r['capped_index_s']} s ({r['capped_gate']}); per class "
        f"{r['capped']['counts']}",
        f"  tool previews: inspect_dataset {r['inspect_preview_bytes']} B, build_index "
        f"{r['build_index_result_bytes']} B (limit {PREVIEW_LIMIT} B: "
        f"{ok(max(r['inspect_preview_bytes'], r['build_index_result_bytes']) <= PREVIEW_LIMIT)}"
        f"; the unbounded scan summary is {r['unbounded_summary_bytes']} B)"]
    if "validate_s" in r:
        lines.append(f"  registration validation {r['validate_s']} s: {r['validate_how']}"
                     + (f"; errors {r['validate_errors']}" if r["validate_errors"] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scan_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000, help="image files per layout")
    parser.add_argument("--layouts", default="class_folders,label_table",
                        help="comma-separated: " + ", ".join(MAKERS))
    parser.add_argument("--workdir", help="where to write the datasets (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated datasets")
    parser.add_argument("--validate", action="store_true",
                        help="also time registration's bounded validation")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the subprocess's entry
    parser.add_argument("--layout", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(Path(args.measure), DESCRIPTION[args.layout], args.validate),
                         default=str))
        return 0
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    unknown = [name for name in layouts if name not in MAKERS]
    if unknown:
        parser.error(f"unknown layouts {unknown}; choose from {', '.join(MAKERS)}")
    base = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="m3b-scale-"))
    results, failed, made = [], False, []
    try:
        for layout in layouts:
            root = base / f"{layout}_{args.files}"
            started = time.perf_counter()
            if not root.exists():
                made.append(root)
                MAKERS[layout](root, args.files, workers=max(1, min(4, os.cpu_count() or 1)))
            make_s = round(time.perf_counter() - started, 1)
            result = {**_child(root, layout, args.validate), "make_s": make_s}
            results.append(result)
            failed |= result["total_s"] > TARGET_SECONDS or \
                result["peak_rss_mb"] * 2**20 > TARGET_BYTES or \
                max(result["inspect_preview_bytes"],
                    result["build_index_result_bytes"]) > PREVIEW_LIMIT
            if not args.json:
                print(_report(result), flush=True)
    finally:
        if not args.keep:  # only what this run made (a --workdir itself stays)
            for root in made:
                shutil.rmtree(root, ignore_errors=True)
            if not args.workdir:
                shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
