"""Build a SICK-shaped, imbalanced NLI file from snli_20k, for docs/own-dataset.md.

One tab-separated file, as SICK ships: ``pair_ID sentence_A sentence_B entailment_label
SemEval_set``, labels in upper case, a column naming each row's split (TRAIN / TRIAL /
TEST), and label shares of 60 % NEUTRAL, 25 % ENTAILMENT, 15 % CONTRADICTION in every split.
Rows are drawn with a fixed seed from snli_20k's train (TRAIN), dev (TRIAL) and test (TEST).

    python scripts/make_imbalanced_nli.py ../shared/data/snli_20k imbalanced.tsv
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

SHARES = {"neutral": 0.60, "entailment": 0.25, "contradiction": 0.15}
SIZES = {"TRAIN": ("train.jsonl", 2000), "TRIAL": ("dev.jsonl", 300), "TEST": ("test.jsonl", 1000)}


def draw(path: Path, n: int, rng: random.Random) -> list[dict[str, str]]:
    """``n`` rows of ``path`` in the label shares of :data:`SHARES`, in a seeded order."""
    by_label: dict[str, list[dict[str, str]]] = {label: [] for label in SHARES}
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["label"] in by_label:
                by_label[row["label"]].append(row)
    rows = []
    for label, share in SHARES.items():
        rows += rng.sample(by_label[label], round(n * share))
    rng.shuffle(rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snli_20k", type=Path, help="the snli_20k folder")
    parser.add_argument("out", type=Path, help="the TSV to write")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--train-size", type=int, default=SIZES["TRAIN"][1], help="TRAIN rows")
    args = parser.parse_args()
    SIZES["TRAIN"] = ("train.jsonl", args.train_size)
    rng = random.Random(args.seed)
    with args.out.open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        out.writerow(["pair_ID", "sentence_A", "sentence_B", "entailment_label", "SemEval_set"])
        pair_id = 0
        for split, (name, n) in SIZES.items():
            for row in draw(args.snli_20k / name, n, rng):
                pair_id += 1
                label = row["label"].upper()
                out.writerow([pair_id, row["premise"], row["hypothesis"], label, split])
    print(f"wrote {pair_id:,} rows to {args.out}")


if __name__ == "__main__":
    main()
