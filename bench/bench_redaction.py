"""Redaction cost per text on LongMemEval_S turns, and a check that the default policy's
preconditions change no result.

Timing: the first ``--texts`` distinct user turns (file order, read at run time from
``--data``) are redacted by ``default_policy()`` ``--rounds`` times; each text's CPU time
(``time.process_time``, which a busy machine stretches far less than wall time) is taken, and
the per-text p50/p95/mean in µs are printed with the load average. The timing uses only
``default_policy().redact``, so any source tree can be timed (``PYTHONPATH=…/src``), in turns.

``--check`` redacts every distinct turn text (both roles) twice, with the default rules and
with the same rules stripped of their preconditions, and reports any text whose redacted text
or counts differ (none is the expected answer; the exit status is 1 otherwise).

Run by hand (not in CI)::

    python bench/bench_redaction.py --texts 2000 --rounds 3
    python bench/bench_redaction.py --check
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import lzma
import os
import statistics
import sys
import time
from pathlib import Path

from engramdb.orchestrator.redaction import RedactionPolicy, default_policy

DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")


def read_turns(path: Path, *, user_only: bool) -> list[str]:
    """Distinct non-empty turn contents in file order (user turns only, or every role)."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    turns: dict[str, None] = {}
    for item in data:
        for session in item["haystack_sessions"]:
            for turn in session:
                content = str(turn["content"])
                if content.strip() and (turn["role"] == "user" or not user_only):
                    turns.setdefault(content, None)
    return list(turns)


def time_policy(texts: list[str], rounds: int) -> None:
    policy = default_policy()
    for round_no in range(rounds):
        samples = []
        for text in texts:
            started = time.process_time()
            policy.redact(text)
            samples.append(time.process_time() - started)
        cuts = statistics.quantiles(samples, n=100, method="inclusive")
        print(
            f"round {round_no + 1}: {len(texts)} texts, per text p50 {cuts[49] * 1e6:.1f} µs, "
            f"p95 {cuts[94] * 1e6:.1f} µs, mean {statistics.fmean(samples) * 1e6:.1f} µs "
            f"(loadavg {' '.join(f'{x:.2f}' for x in os.getloadavg())})"
        )


def check(texts: list[str]) -> int:
    """How many texts the default policy redacts otherwise than its rules without preconditions."""
    fast = default_policy()
    plain = RedactionPolicy(
        tuple(dataclasses.replace(rule, precondition=None) for rule in fast.rules)
    )
    differ = redacted = 0
    for text in texts:
        expected = plain.redact(text)
        redacted += bool(expected.counts)
        if fast.redact(text) != expected:
            differ += 1
            print(f"differs: {text[:120]!r}", file=sys.stderr)
    print(f"{len(texts)} texts, {redacted} with something redacted, {differ} differ")
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        sys.exit(1 if check(read_turns(args.data, user_only=False)) else 0)
    time_policy(read_turns(args.data, user_only=True)[: args.texts], args.rounds)


if __name__ == "__main__":
    main()
