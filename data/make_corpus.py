"""Write ``data/corpus.jsonl.gz``: labelled synthetic crash logs for advisor's learned classifier.

The generator lives in the ``corpus`` package next to this script (engines, one module per
failure family, line shapes, perturbations); this is its command line. Running it twice writes
the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus.jsonl.gz"
for path in (HERE, HERE.parent):  # the corpus package; advisor when not installed
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from corpus.build import write_corpus  # noqa: E402


def main() -> None:
    """Parse the command line and write the corpus."""
    parser = argparse.ArgumentParser(description="Write the learned model's training corpus.")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT}")
    parser.add_argument(
        "--per-failure",
        type=int,
        default=None,
        metavar="N",
        help="at most N examples per label (the first N of the full corpus)",
    )
    args = parser.parse_args()
    write_corpus(args.out, args.per_failure)


if __name__ == "__main__":
    main()
