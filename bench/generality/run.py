"""Generality check runner.

    python -m bench.generality.run [--batch 1|2|3|4|5|all] [--only KEY,...] [--out FILE]
                                   [--build] [--seed N] [--data-dir DIR] [--keep]

``--batch`` picks the cases: 1 (default, ``cases.py``), 2 (``batch2.py``), 3 (``batch3.py``),
4 (``batch4.py``), 5 (``batch5.py``) or all fifty.

Generates every case's folder in a temporary data folder, registers each through the app's
CLI (``python -m crew register PATH --name NAME --description TEXT --home HOME --json``) in
one fresh temporary home, reads the saved datacard and compares it with the expected reading
(see README.md for what "correct" means). With ``--build`` it then asks the crew for each
case's request (``python -m crew build REQUEST --home HOME --yes --json --epochs 1``) and
records the status and which dataset it picked. Prints a table and writes the full results
as JSON (default generality.json in the current folder). One case failing never stops the others.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .cases import CASES, Case

def cases_for(batch: str) -> list[Case]:
    """Batch 1 (``cases.py``), 2 (``batch2.py``), 3 (``batch3.py``), 4 (``batch4.py``), 5
    (``batch5.py``) or ``all`` of them."""
    out: list[Case] = []
    for b in (["1", "2", "3", "4", "5"] if batch == "all" else [batch]):
        if b == "1":
            out += CASES
        elif b == "2":
            from .batch2 import CASES2

            out += CASES2
        elif b == "3":
            from .batch3 import CASES3

            out += CASES3
        elif b == "4":
            from .batch4 import CASES4

            out += CASES4
        else:
            from .batch5 import CASES5

            out += CASES5
    return out

REPO = Path(__file__).resolve().parents[2]
REGISTER_TIMEOUT_S = 600
BUILD_TIMEOUT_S = 15 * 60


# ----------------------------------------------------------------------------- helpers

def norm(name) -> str:
    s = str(name).strip().lower().replace("_", " ").replace("-", " ")
    return re.sub(r"\s+", " ", s)


def parse_json_doc(text: str):
    """The CLI prints exactly one JSON document; be lenient about anything around it."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    start = text.find("{")
    while start != -1:
        try:
            return json.JSONDecoder().raw_decode(text[start:])[0]
        except ValueError:
            start = text.find("{", start + 1)
    return None


def run_cli(args: list[str], home: Path, timeout: int) -> dict:
    env = dict(os.environ)
    env["M3B_HOME"] = str(home)
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-m", "crew", *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=timeout)
        out = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except subprocess.TimeoutExpired as e:
        out = {"rc": None, "stdout": e.stdout or "", "stderr": (e.stderr or "") if isinstance(
            e.stderr, str) else "", "timeout": True}
    out["seconds"] = round(time.time() - t0, 1)
    out["json"] = parse_json_doc(out["stdout"] if isinstance(out["stdout"], str) else "")
    return out


def as_list(v):
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, dict):
        return list(v)
    return [v]


def classes_match(case: Case, got) -> tuple[bool, str]:
    exp = case.expected
    got = [g for g in as_list(got) if norm(g) not in ("background", "bg", "0 background")]
    if exp.task == "report_generation":
        return True, ""
    alias = {}
    for c in exp.classes:
        for n in [c, *exp.synonyms.get(c, [])]:
            alias[norm(n)] = c
    mapped = [alias.get(norm(g)) for g in got]
    if got and None not in mapped and len(set(mapped)) == len(got) and set(mapped) == set(exp.classes):
        return True, ""
    if sorted(map(norm, exp.classes)) == ["0", "1"] and len(got) == 2 and \
            {norm(got[0]), norm(got[1])} in ({norm(got[0]), "no " + norm(got[0])},
                                              {norm(got[1]), "no " + norm(got[1])}):
        # a 0/1 column read as the finding it names ("probSevere" / "no probSevere"): the
        # same reading under the column's name (added after batch 3's first run; README)
        return True, ""
    for other in exp.also_accept_classes:
        if {norm(x) for x in other} == {norm(g) for g in got} and len(got) == len(other):
            return True, ""
    return False, f"classes {sorted(map(str, got))} != {sorted(exp.classes)}"


def readings_of(card: dict, reg: dict) -> list[dict]:
    """The datacard's top-level reading first, then each entry of ``targets``."""
    tasks = as_list(card.get("tasks"))
    primary = {
        "source": "datacard",
        "task": reg.get("task") or (tasks[0] if tasks else None),
        "classes": card.get("classes"),
        "num_samples": card.get("num_samples"),
        "class_counts": card.get("class_counts"),
        "grouping_key": card.get("grouping_key"),
        "label_source": card.get("label_source"),
        "split": card.get("split"),
    }
    out = [primary]
    targets = card.get("targets")
    if isinstance(targets, str):  # tolerate a stringified list
        try:
            import ast

            targets = ast.literal_eval(targets)
        except (ValueError, SyntaxError):
            targets = []
    for t in targets or []:
        if isinstance(t, dict):
            out.append({"source": f"target:{t.get('id') or t.get('name')}", "task": t.get("task"),
                        "classes": t.get("classes"), "num_samples": t.get("num_samples"),
                        "class_counts": t.get("class_counts"),
                        "grouping_key": t.get("patient_key") or t.get("grouping_key"),
                        "label_source": t.get("layout") or t.get("label_source"),
                        "split": t.get("split"), "num_groups": t.get("num_groups")})
    return out


def sample_count(r: dict):
    n = r.get("num_samples")
    if isinstance(n, (int, float)):
        return int(n)
    cc = r.get("class_counts")
    if isinstance(cc, dict) and cc and all(isinstance(v, (int, float)) for v in cc.values()):
        return int(sum(cc.values()))
    return None


def judge_reading(case: Case, r: dict, expected_n: int) -> tuple[bool, str]:
    exp = case.expected
    if r.get("task") != exp.task:
        return False, f"task {r.get('task')} != {exp.task}"
    ok, why = classes_match(case, r.get("classes"))
    if not ok:
        return False, why
    n = sample_count(r)
    if n is None:
        return False, "no sample count in the datacard"
    if abs(n - expected_n) > 0.10 * expected_n:
        return False, f"{n} samples, expected {expected_n} (+-10%)"
    return True, ""


def short(r: dict) -> str:
    cls = as_list(r.get("classes"))
    c = ",".join(map(str, cls[:5])) + ("..." if len(cls) > 5 else "")
    return f"{r.get('task')} [{c}] n={sample_count(r)}"


def expected_str(case: Case, n: int) -> str:
    cls = case.expected.classes
    c = ",".join(cls[:5]) + ("..." if len(cls) > 5 else "")
    return f"{case.expected.task} [{c}] n={n}"


# ----------------------------------------------------------------------------- one case

def register_case(case: Case, data_dir: Path, home: Path, seed: int) -> dict:
    res = {"key": case.key, "public_dataset": case.public_name, "docs": case.docs,
           "layout": case.layout, "name": case.name, "description": case.description,
           "request": case.request}
    try:
        root = case.make(data_dir, seed=seed)
        n_exp = case.expected.count(root)
    except Exception as e:  # noqa: BLE001 - a generator bug is reported, never fatal
        res.update(verdict="error", reason=f"generator failed: {e!r}",
                   traceback=traceback.format_exc())
        return res
    exp = case.expected
    res["path"] = str(root)
    res["expected"] = {"task": exp.task, "classes": exp.classes, "num_samples": n_exp,
                       "grouping": exp.grouping, "split_ships": exp.split_ships,
                       "alternates": exp.alternates, "note": exp.note}
    res["expected_str"] = expected_str(case, n_exp)
    cli = run_cli(["register", str(root), "--name", case.name, "--description",
                   case.description, "--home", str(home), "--json"], home, REGISTER_TIMEOUT_S)
    reg = cli["json"]
    res["register"] = {"rc": cli["rc"], "seconds": cli["seconds"],
                       "stderr_tail": (cli.get("stderr") or "")[-2000:],
                       "timeout": cli.get("timeout", False), "json": reg}
    if cli.get("timeout"):
        res.update(verdict="refused", got="(timeout)",
                   reason=f"register did not finish in {REGISTER_TIMEOUT_S} s")
        return res
    if not isinstance(reg, dict):
        res.update(verdict="refused", got="(no JSON)",
                   reason=f"rc={cli['rc']}, no JSON on stdout; stderr: "
                          f"{(cli.get('stderr') or '').strip().splitlines()[-1:] }")
        return res
    status = reg.get("status")
    if status != "registered":
        interp = reg.get("interpretations") or []
        res["interpretations"] = interp
        if status == "needs_choice":
            # would one of the offered readings have been right?
            hits = []
            for i, it in enumerate(interp if isinstance(interp, list) else []):
                if isinstance(it, dict):
                    r = {"task": it.get("task"), "classes": it.get("classes"),
                         "num_samples": it.get("num_samples"), "class_counts": it.get("class_counts")}
                    if judge_reading(case, r, n_exp)[0]:
                        hits.append(i + 1)
            offered = "; ".join(short({"task": it.get("task"), "classes": it.get("classes"),
                                       "num_samples": it.get("num_samples"),
                                       "class_counts": it.get("class_counts")})
                                for it in interp if isinstance(it, dict))
            res.update(verdict="needs_choice", got=f"choice of {len(interp)}",
                       reason=(f"expected reading offered as option {hits}" if hits else
                               "expected reading not among the options") + f": {offered}"[:300])
        else:
            errs = reg.get("errors") or reg.get("error") or []
            res.update(verdict="refused", got=str(status or reg.get("kind")),
                       reason="; ".join(map(str, as_list(errs)))[:300])
        return res
    card = {}
    try:
        card = json.loads(Path(reg["datacard_path"]).read_text())
    except Exception as e:  # noqa: BLE001
        res["datacard_error"] = repr(e)
    res["datacard"] = card
    readings = readings_of(card, reg)
    res["readings"] = readings
    primary = readings[0]
    res["got"] = short(primary)
    ok, why = judge_reading(case, primary, n_exp)
    if ok:
        res.update(verdict="correct", reason="datacard reading matches")
    else:
        hit = next((r for r in readings[1:] if judge_reading(case, r, n_exp)[0]), None)
        if hit is not None:
            res.update(verdict="correct",
                       reason=f"matched by {hit['source']} (primary: {why})")
        else:
            alt = None
            for r in readings:
                for a in exp.alternates:
                    if r.get("task") == a["task"] and (
                            a["classes"] is None or {norm(x) for x in a["classes"]} ==
                            {norm(x) for x in as_list(r.get("classes"))}):
                        alt = r
            res.update(verdict="wrong reading",
                       reason=why + (f"; read as a defensible alternative ({short(alt)})"
                                     if alt else ""))
    # information only (not part of the verdict): grouping key and shipped split
    g = primary.get("grouping_key")
    res["grouping_got"] = g
    res["grouping_expected"] = exp.grouping
    res["split_got"] = [r.get("split") for r in readings]
    res["warnings"] = reg.get("warnings")
    return res


def build_case(case: Case, home: Path) -> dict:
    cli = run_cli(["build", case.request, "--home", str(home), "--yes", "--json", "--epochs", "1"],
                  home, BUILD_TIMEOUT_S)
    j = cli["json"] if isinstance(cli["json"], dict) else {}
    return {"rc": cli["rc"], "seconds": cli["seconds"], "timeout": cli.get("timeout", False),
            "status": j.get("status") or ("timeout" if cli.get("timeout") else "no JSON"),
            "dataset": j.get("dataset"), "task": j.get("task"), "metrics": j.get("metrics"),
            "error": j.get("error"), "reasons": j.get("reasons"), "job_id": j.get("job_id"),
            "picked_own_dataset": j.get("dataset") == case.name,
            "stderr_tail": (cli.get("stderr") or "")[-1500:]}


# ----------------------------------------------------------------------------- table

def print_table(results: list[dict], build: bool) -> None:
    cols = ["key", "public dataset", "expected", "got", "verdict", "reason"]
    if build:
        cols.insert(5, "build")
    rows = []
    for r in results:
        row = [r["key"], r["public_dataset"][:34], r.get("expected_str", "-")[:46],
               str(r.get("got", "-"))[:46], r.get("verdict", "?")]
        if build:
            b = r.get("build") or {}
            row.append(f"{b.get('status')}->{b.get('dataset')}" if b else "-")
        row.append(str(r.get("reason", ""))[:150])
        rows.append(row)
    widths = [max(len(c), *(len(x[i]) for x in rows)) if rows else len(c)
              for i, c in enumerate(cols)]
    widths[-1] = len(cols[-1])
    line = " | ".join(c.ljust(w) for c, w in zip(cols, widths))
    print(line)
    print("-" * len(line))
    for x in rows:
        print(" | ".join(v.ljust(w) for v, w in zip(x, widths)))
    n_ok = sum(r.get("verdict") == "correct" for r in results)
    print(f"\n{n_ok}/{len(results)} read correctly")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="1", choices=["1", "2", "3", "4", "5", "all"],
                    help="which ten cases: 1 (default), 2, 3, 4, 5, or all fifty")
    ap.add_argument("--only", default="", help="comma-separated case keys")
    ap.add_argument("--out", default="generality.json")
    ap.add_argument("--build", action="store_true", help="also run crew build per request")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default="", help="write the folders here (default: temp)")
    ap.add_argument("--keep", action="store_true", help="keep the temp data and home folders")
    a = ap.parse_args(argv)
    keys = [k.strip() for k in a.only.split(",") if k.strip()]
    pool = cases_for(a.batch)
    unknown = [k for k in keys if k not in {c.key for c in pool}]
    if unknown:
        print(f"unknown case keys for --batch {a.batch}: {unknown}; known: "
              f"{[c.key for c in pool]}", file=sys.stderr)
        return 2
    cases = [c for c in pool if not keys or c.key in keys]
    work = Path(tempfile.mkdtemp(prefix="m3b_generality_"))
    data_dir = Path(a.data_dir) if a.data_dir else work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    home.mkdir()
    print(f"data: {data_dir}\nhome: {home}\n", file=sys.stderr)
    results = []
    for c in cases:
        t0 = time.time()
        try:
            r = register_case(c, data_dir, home, a.seed)
        except Exception as e:  # noqa: BLE001
            r = {"key": c.key, "public_dataset": c.public_name, "verdict": "error",
                 "reason": f"runner error: {e!r}", "traceback": traceback.format_exc()}
        r["seconds"] = round(time.time() - t0, 1)
        print(f"[{c.key}] {r.get('verdict')}: {r.get('reason', '')[:160]}", file=sys.stderr)
        results.append(r)
    if a.build:
        for c, r in zip(cases, results):
            try:
                r["build"] = build_case(c, home)
            except Exception as e:  # noqa: BLE001
                r["build"] = {"status": "runner error", "error": repr(e)}
            print(f"[{c.key}] build: {r['build'].get('status')} -> {r['build'].get('dataset')}",
                  file=sys.stderr)
    print_table(results, a.build)
    out = {"batch": a.batch, "seed": a.seed, "data_dir": str(data_dir), "home": str(home),
           "python": sys.executable, "repo": str(REPO), "results": results}
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"\nfull results: {a.out}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
        if a.data_dir:
            pass  # a folder the user named is left alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
