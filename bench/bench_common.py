"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max/mean of ``samples_s`` (seconds), in milliseconds."""
    cuts = statistics.quantiles(samples_s, n=100, method="inclusive")
    return {
        "p50": cuts[49] * 1e3,
        "p95": cuts[94] * 1e3,
        "p99": cuts[98] * 1e3,
        "max": max(samples_s) * 1e3,
        "mean": statistics.fmean(samples_s) * 1e3,
    }


def save_result(kind: str, result: dict[str, Any]) -> Path:
    """Write ``result``, with the machine and the date, to ``results/<kind>-<stamp>.json``
    (git-ignored); print and return the path."""
    now = dt.datetime.now(dt.UTC)
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    result["date"] = now.isoformat(timespec="seconds")
    result["load_average"] = os.getloadavg()
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"{kind}-{now.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"written to {out}")
    return out
