"""How a shortcut split of the full SNLI test set matches the official SNLI-hard.

Its numbers are in docs/results/history.md ("Shortcut splits").

Run: ``python scripts/shortcut_split_vs_snli_hard.py SPLIT_DIR [SPLIT_DIR ...]`` where each
folder was written by ``zdebias shortcut-split --train snli_20k/train.jsonl --test
snli_full_devtest::test``; ``--hard`` (default ``$ZDEBIAS_TEST_DATA/snli_hard/...``).

SNLI-hard (Gururangan et al. 2018) holds the 3,261 test pairs a hypothesis-only fastText model
got wrong. Rows are matched on the lower-cased letters and digits of premise and hypothesis
(the full test set is space-tokenised, SNLI-hard is not) and the gold label, as multisets. Prints,
per folder, the conflicting rows, the SNLI-hard rows found, their overlap, precision (share of
conflicting rows in SNLI-hard) and recall (share of SNLI-hard rows that are conflicting), and
where the SNLI-hard rows went.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

from zdebias.data.readers import read_records

Key = tuple[str, str, str]


def _letters(text: str | None) -> str:
    return "".join(ch for ch in (text or "").lower() if ch.isalnum())


def key(premise: str | None, hypothesis: str | None, label: str) -> Key:
    return _letters(premise), _letters(hypothesis), label


def main() -> None:
    data = Path(os.environ.get("ZDEBIAS_TEST_DATA", "../shared/data"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("splits", nargs="+")
    parser.add_argument("--hard", default=str(data / "snli_hard" / "snli_1.0_test_hard.jsonl"))
    args = parser.parse_args()
    hard = Counter(key(r.premise, r.hypothesis, r.label) for r in read_records(args.hard))
    print(f"SNLI-hard: {sum(hard.values()):,} rows")
    for folder in args.splits:
        summary = json.loads((Path(folder) / "summary.json").read_text())
        found: dict[str, Counter[Key]] = {}
        for name in ("aligned", "conflicting", "free"):
            rows = read_records(Path(folder) / f"{name}.jsonl", format="jsonl", task="nli")
            found[name] = Counter(key(r.premise, r.hypothesis, r.label) for r in rows)
        in_hard = {name: sum((c & hard).values()) for name, c in found.items()}
        n_hard = sum(in_hard.values())
        n_conf = sum(found["conflicting"].values())
        both = in_hard["conflicting"]
        print(
            f"{folder} (by {summary['by']}): conflicting {n_conf:,}; SNLI-hard rows found in "
            f"the split {n_hard:,}; overlap {both:,}; precision {both / n_conf:.3f}; recall "
            f"{both / n_hard:.3f}; SNLI-hard rows per slice {in_hard}"
        )


if __name__ == "__main__":
    main()
