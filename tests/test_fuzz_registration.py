"""Fuzzed registrations (issue 14): a few hundred generated bad or odd dataset folders through
the real registration. Zero tracebacks, every refusal names a file or the folder, the folder is
byte-identical afterwards, no datacard is left by a refusal, the store stays consistent.
``make fuzz`` runs the full count (bench/fuzz_registration.py)."""
from __future__ import annotations

from collections import Counter

from bench.fuzz_registration import Outcome, run

EXAMPLES = 250


def test_fuzzed_registrations_never_crash_lose_data_or_mumble(tmp_path):
    totals: Counter = Counter()
    problems: list[str] = []

    def record(spec, outcome: Outcome) -> None:
        totals[outcome.status] += 1
        problems.extend(f"{p}\n  folder: {spec!r}"[:2000] for p in outcome.problems)

    run(EXAMPLES, 0, tmp_path, record)
    assert not problems, problems[:3]
    assert sum(totals.values()) >= EXAMPLES
    assert totals["traceback"] == 0
    # the generator reaches both sides: some folders register, many are refused clearly
    assert totals["invalid"] > EXAMPLES // 4 and totals["registered"] + totals["needs_choice"] > 0
