"""System versus expert: the product end to end against what a strong ML engineer writes by hand
(and, for segmentation, nnU-Net v2), on the same data, split, network family and epochs.

    python -m bench.vs_expert [--quick] [--scale S] [--only diagnosis_2d,...] [--workdir DIR]
                              [--keep] [--out DIR] [--no-nnunet]
    python -m bench.vs_expert --show <out>/vs_expert-<time>.json     (the tables again)

For each task (2D diagnosis from class folders, 3D diagnosis from NIfTI class folders, 3D
segmentation in the Decathlon layout; datasets from ``bench.expert.datasets``), one after the
other so they do not share the CPU:

1. **system**: the dataset registered in a fresh home (``python -m crew register``) and the
   request built in autopilot (``python -m crew build REQUEST --yes --epochs N``: the epoch
   budget is the user's plan edit at approval);
2. **expert**: ``bench.expert.diagnosis`` / ``bench.expert.segmentation`` on the system job's
   split, network, sizes and epochs;
3. **nnU-Net** (segmentation): ``bench.expert.nnunet``, nnU-Net's own tools on the same cases
   and split.

Every pipeline is scored by the system's evaluator. Per task it prints wall time, the headline
metric (AUC or Dice), accuracy at the chosen threshold, training samples/s and ECE with the
targets (``bench.expert.targets``) and writes everything to ``<out>/vs_expert-<time>.json``
after each task. Exit status 1 when a target is missed or a pipeline failed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.expert.datasets import BenchDataset, bench_datasets
from bench.expert.targets import check_task, checks_json, format_task

REPO = Path(__file__).resolve().parents[1]
TASKS = ("diagnosis_2d", "diagnosis_3d", "segmentation_3d")
EPOCHS = {"diagnosis_2d": 8, "diagnosis_3d": 20, "segmentation_3d": 15}
QUICK_EPOCHS = {"diagnosis_2d": 2, "diagnosis_3d": 3, "segmentation_3d": 3}
QUICK_SCALE = 0.15
TIME_BUDGET_MIN = 120          # the system's plan must not stop training before the epochs end
PATCHES_PER_CASE = 4           # segmentation samples per case and epoch (all three pipelines)
HEADLINE = {"diagnosis": "auc", "segmentation": "dice"}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def child_env(workdir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("M3B_HOME", "M3B_LLM")}
    env.update(CREWAI_STORAGE_DIR=str(workdir / "crewai"), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    return env


def timed(command: list[str], env: dict, log: Path) -> tuple[int, float, str]:
    """Run a child of this process (output to ``log``); (exit status, wall seconds, stdout)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "w") as err:
        done = subprocess.run([sys.executable, *command], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=err, text=True)
    seconds = time.perf_counter() - started
    with open(log, "a") as err:
        err.write("\n--- stdout\n" + done.stdout)
    return done.returncode, seconds, done.stdout


def _tail(log: Path, n: int = 600) -> str:
    return log.read_text(errors="replace")[-n:].strip().replace("\n", " | ")


def _json_tail(stdout: str) -> dict:
    """The JSON object a ``--json`` command printed last."""
    start = stdout.find("{")
    try:
        return json.loads(stdout[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        return {}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def find_ece(report: dict) -> float | None:
    """ECE from the evaluator's calibration block (after its temperature) or its metrics."""
    cal = report.get("calibration") or {}
    for key in ("ece_after", "ece"):
        if isinstance(cal.get(key), (int, float)):
            return float(cal[key])
    value = (report.get("metrics") or {}).get("ece")
    return float(value) if isinstance(value, (int, float)) else None


def find_ece_floor(report: dict) -> float | None:
    """The ECE a perfectly calibrated model could show on the same test cases (95th pct)."""
    floor = ((report.get("calibration") or {}).get("ece_after_uncertainty") or {}) \
        .get("noise_floor")
    return float(floor) if isinstance(floor, (int, float)) else None


def decision_of(report: dict, own: dict | None = None) -> tuple[float | None, float | None]:
    """(accuracy, threshold) at the evaluator's operating point, else the pipeline's own."""
    for point in (report.get("operating_point"), own):
        if isinstance(point, dict) and isinstance((point.get("test") or {}).get("accuracy"),
                                                  (int, float)):
            return float(point["test"]["accuracy"]), point.get("threshold")
    return None, None


def system_samples_per_s(summary: dict, template: str) -> float | None:
    """The template's own figure, else training samples (patches for segmentation) over the
    training seconds."""
    if isinstance(summary.get("train_samples_per_second"), (int, float)):
        return float(summary["train_samples_per_second"])
    seconds = summary.get("train_seconds") or summary.get("seconds")
    if not seconds or not summary.get("num_train") or not summary.get("epochs_run"):
        return None
    per_case = PATCHES_PER_CASE if template == "segmentation" else 1
    return summary["num_train"] * per_case * float(summary["epochs_run"]) / float(seconds)


def run_system(ds: BenchDataset, epochs: int, workdir: Path, env: dict) -> tuple[dict, Path | None]:
    home = workdir / "homes" / ds.key
    if home.exists():
        shutil.rmtree(home)  # a fresh home each run: one card, one job
    logs = workdir / "logs"
    record: dict = {"error": None}
    rc, record["register_s"], _ = timed(
        ["-m", "crew", "register", str(ds.path), "--name", ds.name, "--description",
         ds.description, "--home", str(home), "--json"], env, logs / f"{ds.key}-register.log")
    if rc:
        record["error"] = f"registration failed: {_tail(logs / f'{ds.key}-register.log')}"
        return record, None
    rc, seconds, stdout = timed(["-m", "crew", "build", ds.request, "--yes", "--epochs",
                                 str(epochs), "--time-budget", str(TIME_BUDGET_MIN), "--llm",
                                 "autopilot", "--home", str(home), "--json"], env,
                                logs / f"{ds.key}-system.log")
    result = _json_tail(stdout)
    record["wall_s"] = seconds
    workspace = Path(result["workspace"]) if result.get("workspace") else None
    if rc or result.get("status") != "succeeded" or workspace is None:
        record["error"] = (f"crew build ended {result.get('status', 'without a result')}: "
                           f"{result.get('error') or _tail(logs / f'{ds.key}-system.log')}")
        return record, workspace
    plan = read_json(workspace / "plan.json")
    if plan.get("template") != ds.template:
        record["error"] = f"the plan chose the {plan.get('template')!r} template"
        return record, None
    report = read_json(workspace / "report.json")
    summary = read_json(workspace / "Logout" / "train_summary.json")
    accuracy, threshold = decision_of(report)
    record.update(workspace=str(workspace), job_id=result.get("job_id"),
                  metric=(report.get("metrics") or {}).get(HEADLINE[ds.template]),
                  metrics=report.get("metrics"), accuracy_at_threshold=accuracy,
                  threshold=threshold, ece=find_ece(report), ece_floor=find_ece_floor(report),
                  samples_per_s=system_samples_per_s(summary, ds.template),
                  network=summary.get("network"), epochs_run=summary.get("epochs_run"),
                  stop_reason=summary.get("stop_reason"), num_train=summary.get("num_train"),
                  num_test=summary.get("num_test"))
    return record, workspace


def run_baseline(module: str, name: str, ds: BenchDataset, workspace: Path, workdir: Path,
                 env: dict) -> dict:
    out = workdir / name / ds.key
    if out.exists():
        shutil.rmtree(out)
    log = workdir / "logs" / f"{ds.key}-{name}.log"
    rc, seconds, _ = timed(["-m", module, "--job", str(workspace), "--out", str(out)], env, log)
    result = read_json(out / "expert_result.json")
    if rc or not result:
        return {"error": f"{module} exited {rc}: {_tail(log)}", "wall_s": seconds}
    report = read_json(Path(result["report"]))
    accuracy, threshold = decision_of(report, result.get("operating_point"))
    return {"error": None, "wall_s": seconds, "metric": (result.get("metrics") or {}).get(
                HEADLINE[ds.template]), "metrics": result.get("metrics"),
            "accuracy_at_threshold": accuracy, "threshold": threshold, "ece": find_ece(report),
            "ece_floor": find_ece_floor(report),
            "own_operating_point": result.get("operating_point"),
            "samples_per_s": result.get("train_samples_per_second"),
            "network": result.get("network"), "epochs_run": result.get("epochs"),
            "best_epoch": result.get("best_epoch"), "num_train": result.get("num_train"),
            "num_val": result.get("num_val"), "num_test": result.get("num_test"),
            "sections": result.get("sections"), "out": str(out)}


def run_task(ds: BenchDataset, epochs: int, workdir: Path, env: dict, nnunet: bool) -> dict:
    task = {"key": ds.key, "template": ds.template, "metric": HEADLINE[ds.template],
            "dataset": str(ds.path), "request": ds.request, "epochs": epochs, "pipelines": {}}
    _log(f"[{ds.key}] system: register + build ({epochs} epochs) ...")
    system, workspace = run_system(ds, epochs, workdir, env)
    task["pipelines"]["system"] = system
    if system.get("error") or workspace is None:
        task["pipelines"]["expert"] = {"error": "not run: the system job gave no split to follow"}
    else:
        module = "bench.expert.diagnosis" if ds.template == "diagnosis" \
            else "bench.expert.segmentation"
        _log(f"[{ds.key}] expert: {module} ...")
        task["pipelines"]["expert"] = run_baseline(module, "expert", ds, workspace, workdir, env)
    if ds.template == "segmentation" and nnunet:
        if workspace is None or system.get("error"):
            task["pipelines"]["nnunet"] = {"error": "not run: no system job to follow"}
        else:
            _log(f"[{ds.key}] nnU-Net: bench.expert.nnunet ...")
            task["pipelines"]["nnunet"] = run_baseline("bench.expert.nnunet", "nnunet", ds,
                                                       workspace, workdir, env)
    system = task["pipelines"]["system"]
    unit = "cases" if ds.template == "segmentation" else "images"
    task["summary"] = (f"{system.get('num_train') or '?'} train / "
                       f"{system.get('num_test') or '?'} test {unit}, {epochs} epochs, "
                       f"{system.get('network') or '?'}, metric {task['metric']}")
    checks = check_task(task)
    task["checks"] = checks_json(checks)
    task["table"] = format_task(task, checks)
    return task


def default_out() -> Path:
    from core.config.settings import get_settings
    return get_settings().home / "bench"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vs_expert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: scale {QUICK_SCALE}, epochs {QUICK_EPOCHS}")
    parser.add_argument("--scale", type=float, help="dataset size factor (default 1.0)")
    parser.add_argument("--only", help=f"comma-separated tasks of {', '.join(TASKS)}")
    parser.add_argument("--workdir", help="folder for data, homes and outputs (kept; default a "
                                          "temporary folder removed at the end)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--out", help="folder for the results JSON (default <home>/bench)")
    parser.add_argument("--no-nnunet", action="store_true", help="skip nnU-Net")
    parser.add_argument("--show", metavar="JSON", help="print the tables of a results file")
    args = parser.parse_args(argv)
    if args.show:
        for task in json.loads(Path(args.show).read_text())["tasks"]:
            print(format_task(task, check_task(task)) + "\n")
        return 0
    only = tuple(t.strip() for t in args.only.split(",")) if args.only else TASKS
    unknown = sorted(set(only) - set(TASKS))
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    scale = args.scale or (QUICK_SCALE if args.quick else 1.0)
    epochs = QUICK_EPOCHS if args.quick else EPOCHS
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="m3b-vs-expert-")).resolve()
    out_dir = Path(args.out) if args.out else default_out()
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / f"vs_expert-{time.strftime('%Y%m%d-%H%M%S')}.json"
    env = child_env(workdir)
    started = time.time()
    results = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "scale": scale,
               "quick": args.quick, "workdir": str(workdir), "cpus": os.cpu_count(),
               "tasks": []}
    try:
        _log(f"generating datasets (scale {scale}) in {workdir / 'data'} ...")
        datasets = bench_datasets(workdir / "data", scale=scale, only=only)
        for ds in datasets:
            task = run_task(ds, epochs[ds.key], workdir, env, nnunet=not args.no_nnunet)
            results["tasks"].append(task)
            results["seconds"] = round(time.time() - started, 1)
            out_file.write_text(json.dumps(results, indent=2, default=str))
            print(task["table"] + "\n", flush=True)
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    failed = [t["key"] for t in results["tasks"]
              if any(c["passed"] is False for c in t["checks"])
              or any(p.get("error") for p in t["pipelines"].values())]
    verdict = ("targets missed or pipelines failed in " + ", ".join(failed) if failed
               else "all targets met")
    print(f"results: {out_file}  ({(time.time() - started) / 60:.1f} min; {verdict})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
