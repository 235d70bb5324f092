#!/usr/bin/env python3
"""validate_rows.py: checks files of results rows with the schema every reader applies
(resultslib/schema.py: strict JSON, every key, finite figures, min <= median <= max).

    python3 -m harness.resultslib.validate_rows [--baseline] FILE...

--baseline: the shape ci/check_regression.sh compares (results/baselines/*.jsonl: fewer
keys; step_ms may be a plain median or {median, noise}). Exit 0 every row good; 2 at the
first bad row, one line on stderr naming the file and line (or an unreadable file).
"""
import argparse
import os
import sys

from .. import resultslib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", action="store_true", help="check_regression's shape (results/baselines/)")
    ap.add_argument("files", nargs="+", metavar="FILE")
    args = ap.parse_args()
    for path in args.files:
        if not os.path.isfile(path):
            print(f"validate_rows: {path}: not a readable file", file=sys.stderr)
            return 2
        try:
            resultslib.load_rows(path, "baseline" if args.baseline else "results")
        except (resultslib.RowsError, OSError, UnicodeDecodeError) as e:
            print(f"validate_rows: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
