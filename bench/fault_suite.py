"""The hardening suites of issue 14 in one run, with totals: the escape corpus (every attempt
must be refused and nothing outside the workspace may change), the faults (kill -9, a damaged
or locked store, an unusable home, a full disk, SIGTERM of the app: each must end in a
documented state with a clear message) and the fuzzed registrations.

    python -m bench.fault_suite [--fuzz-examples 1000]      (make faults)

It runs the suites' tests with pytest and reads their JUnit report: a case that passed is an
escape refused, a fault ending in its documented state, or a folder registered or refused
cleanly; a failure is counted as an escape, a traceback or data lost by its suite. The fuzzed
registrations are counted per folder (bench/fuzz_registration.py). Exit status 1 when anything
failed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITES = {
    "escapes": ["tests/test_sandbox_escape.py", "tests/test_sandbox_hardening.py",
                "tests/test_sandbox_protections.py", "tests/test_process_tree.py",
                "tests/test_store_confinement.py", "tests/test_secrets_env.py",
                "tests/test_dataset_root_fixed.py", "tests/test_pretrained_weights_path.py",
                "tests/test_bounded_reads.py", "tests/test_hostile_llm.py"],
    "faults": ["tests/test_kill_build.py", "tests/test_kill_stages.py",
               "tests/test_store_faults.py", "tests/test_cli_json.py", "tests/test_fault_disk_full.py",
               "tests/test_fault_app_sigterm.py", "tests/test_symlink_loops.py"],
}


def run_suite(files: list[str]) -> Counter:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"--junitxml={report}", *files], cwd=REPO, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        counts: Counter = Counter()
        if not report.exists():
            counts["failed"] += 1
            return counts
        for case in ET.parse(report).getroot().iter("testcase"):
            counts["cases"] += 1
            if case.find("skipped") is not None:
                counts["skipped"] += 1
            elif case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            else:
                counts["passed"] += 1
        return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz-examples", type=int, default=1000)
    args = parser.parse_args(argv)
    started = time.time()
    totals = {name: run_suite(files) for name, files in SUITES.items()}
    fuzz = subprocess.run([sys.executable, "-m", "bench.fuzz_registration", "--examples",
                           str(args.fuzz_examples)], cwd=REPO, capture_output=True, text=True)
    fuzz_lines = [ln for ln in fuzz.stdout.splitlines() if ln.startswith(("fuzzed", "  "))][:8]
    esc, flt = totals["escapes"], totals["faults"]
    print(f"hardening suites ({time.time() - started:.0f} s)")
    print(f"  escape corpus   {esc['cases']} cases: {esc['passed']} refused with nothing "
          f"changed outside, escapes = {esc['failed']}, skipped {esc['skipped']}")
    print(f"  fault suite     {flt['cases']} cases: {flt['passed']} ended in their documented "
          f"state with a clear message, tracebacks or data lost = {flt['failed']}, "
          f"skipped {flt['skipped']}")
    print("  " + "\n  ".join(fuzz_lines))
    return 1 if esc["failed"] or flt["failed"] or fuzz.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
