"""Performance figures for the README and the issues' closing notes. One run prints every figure.

    .venv/bin/python scripts/bench.py            # full sizes (minutes)
    .venv/bin/python scripts/bench.py --quick    # small sizes, to check the script works
    .venv/bin/python scripts/bench.py --only core,import

Each area's measurements live in ``scripts/bench_<area>.py`` with ``run(quick: bool) -> list[str]``.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from pathlib import Path

AREAS = [
    *("cli", "core", "import", "rescore", "audit", "postgres", "web"),
    *("record", "harness", "resim", "evidence", "remote", "scale", "soak"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: checks the script, figures mean little")
    ap.add_argument("--only", default=",".join(AREAS), help=f"comma-separated areas (default: {','.join(AREAS)})")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' toolkit
    print(f"# bench on {platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    for area in [a.strip() for a in args.only.split(",") if a.strip()]:
        try:
            mod = importlib.import_module(f"bench_{area}")
        except ModuleNotFoundError as e:
            if e.name != f"bench_{area}":
                raise
            print(f"\n## {area}: no bench module")
            continue
        print(f"\n## {area}")
        t0 = time.perf_counter()
        for line in mod.run(args.quick):
            print(line, flush=True)
        print(f"({area} took {time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
