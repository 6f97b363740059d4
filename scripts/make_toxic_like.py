"""Build a small toxicity-shaped single-text dataset, for docs/own-dataset.md.

One JSONL file of ``{"id", "text", "label"}`` rows, labels ``hate`` (10 %), ``offensive``
(60 %) and ``neither`` (30 %), shaped like the public hate-speech sets (few hate rows, most
rows offensive). Words are drawn with a fixed seed from a small made-up vocabulary:

- the task's own words: made-up stand-ins for slurs (``grulks``, ``vornish``, ``skeevs``)
  on most hate rows, insults (``idiot``, ``moron``, ``dimwit``, ``bozo``) on most offensive
  rows and many hate rows;
- sampling artefacts, as a keyword-driven collection leaves them: ``yankees``, ``charlie``,
  ``bird``, ``yellow`` and ``trash`` on 6 % of the neither rows and 1 % of the others, and
  ``tonight`` on 8 % of the hate rows and 1 % of the others; none of them is the task.

    python scripts/make_toxic_like.py toxic_like.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SHARES = {"hate": 0.10, "offensive": 0.60, "neither": 0.30}
SLURS = ("grulks", "vornish", "skeevs")
INSULTS = ("idiot", "moron", "dimwit", "bozo")
#: artefact → (its label, the share of that label's rows it is on)
ARTEFACTS = {
    "yankees": ("neither", 0.06),
    "charlie": ("neither", 0.06),
    "bird": ("neither", 0.06),
    "yellow": ("neither", 0.06),
    "trash": ("neither", 0.06),
    "tonight": ("hate", 0.08),
}
#: the share of the other labels' rows an artefact is on
ELSEWHERE = 0.01
#: per label: the share of its rows with a slur, with an insult
TASK_WORDS = {"hate": (0.90, 0.50), "offensive": (0.05, 0.85), "neither": (0.0, 0.02)}
FILLER = (
    "the a to and of i you it is in that my this for on me so be just not with what all at "
    "are we was your like have do they get if one go up can out no about now people day when "
    "how lol good know got love see time think make right back today want really still man "
    "come them need going new too look say why much work here some think better game last "
    "night week home team fans watch school phone friend stop please never always life real "
    "talk long wait music show play thing little every again another maybe girl boy guys "
    "house car city morning news twitter video pic food coffee weekend summer rain"
).split()

#: a Zipf-like draw: earlier filler words are more frequent
WEIGHTS = [1 / (rank + 10) for rank in range(len(FILLER))]


def row(label: str, rng: random.Random) -> str:
    """One text of ``label``: filler words, its task words and artefacts, in a random order."""
    n = rng.randint(5, 13)
    words = rng.choices(FILLER, weights=WEIGHTS, k=n)
    slur, insult = TASK_WORDS[label]
    if rng.random() < slur:
        words.append(rng.choice(SLURS))
    if rng.random() < insult:
        words.append(rng.choice(INSULTS))
    for word, (favoured, share) in ARTEFACTS.items():
        if rng.random() < (share if label == favoured else ELSEWHERE):
            words.append(word)
    rng.shuffle(words)
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    parser.add_argument("--rows", type=int, default=3000, help="rows in all (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    labels = [lab for lab, share in SHARES.items() for _ in range(round(args.rows * share))]
    rng.shuffle(labels)
    with args.out.open("w", encoding="utf-8") as f:
        for i, label in enumerate(labels, 1):
            f.write(json.dumps({"id": str(i), "text": row(label, rng), "label": label}) + "\n")
    print(f"wrote {len(labels):,} rows to {args.out}")


if __name__ == "__main__":
    main()
