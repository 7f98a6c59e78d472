#!/usr/bin/env python3
"""HTML to text against the number of paragraphs (issue 33): is `triage.intake.html.html_to_text` linear?

    python bench/intake/html_scaling.py [--runs 7] [-o bench/intake/results/html-scaling.json]

Converts 4,000, 8,000, 16,000, 32,000 and 64,000 paragraphs of a help-desk e-mail's HTML, each size once per
round, the sizes' order rotated every round (a slow moment hits every size), and reports per size the median
CPU time of this process (other work on a shared machine does not count) and the median per paragraph. The
ratio 32,000 ÷ 4,000 is 8 for a linear pass and 64 for a quadratic one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from triage.intake.html import html_to_text  # noqa: E402

SIZES = (4000, 8000, 16000, 32000, 64000)


def paragraphs(n: int) -> str:
    """The same paragraphs tests/test_hostile_exports.py times."""
    return "".join(f"<p>Paragraph {i}: the parcel is <b>late</b> &amp; the invoice is wrong.</p>\n" for i in range(n))


def cpu_seconds(value: str) -> float:
    t = time.process_time()
    html_to_text(value)
    return time.process_time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "bench" / "intake" / "results" / "html-scaling.json")
    args = ap.parse_args()
    values = {n: paragraphs(n) for n in SIZES}
    times: dict[int, list[float]] = {n: [] for n in SIZES}
    for r in range(args.runs):
        order = SIZES[r % len(SIZES) :] + SIZES[: r % len(SIZES)]
        for n in order:
            times[n].append(cpu_seconds(values[n]))
    rows = {
        n: {
            "bytes": len(values[n]),
            "cpu_s_median": statistics.median(times[n]),
            "us_per_paragraph_median": statistics.median(times[n]) / n * 1e6,
            "cpu_s": times[n],
        }
        for n in SIZES
    }
    out = {
        "runs": args.runs,
        "load_average_at_start": os.getloadavg()[0],
        "sizes": rows,
        "ratio_32000_over_4000": rows[32000]["cpu_s_median"] / rows[4000]["cpu_s_median"],
        "linear_ratio": 8,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    for n in SIZES:
        print(
            f"{n:>6} paragraphs ({rows[n]['bytes'] / 1e6:.2f} MB): median {rows[n]['cpu_s_median']:.3f} s CPU, "
            f"{rows[n]['us_per_paragraph_median']:.1f} µs a paragraph"
        )
    print(f"32,000 ÷ 4,000: {out['ratio_32000_over_4000']:.2f} (linear 8, quadratic 64); wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
