"""A toy NLI set shared by the generator tests (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

from zdebias.data.schema import Record

TOY_PREMISES = [
    "A man is sleeping on a bench in the park.",
    "Two dogs are running through the snow.",
    "A woman is playing a guitar outside.",
    "The child is eating an apple.",
]
TOY_HYPOTHESES = {
    "entailment": ["A person sleeps.", "Animals run.", "A woman plays music.", "A kid eats."],
    "neutral": [
        "The man is tired.",
        "The dogs are happy.",
        "The woman is famous.",
        "The child is hungry.",
    ],
    "contradiction": [
        "Nobody is sleeping.",
        "The cats sleep.",
        "The woman is not outside.",
        "The child is asleep.",
    ],
}


def toy_records() -> list[Record]:
    """12 NLI records: 4 premises, each with one hypothesis per label."""
    return [
        Record(id=f"toy:{i}:{label}", premise=p, hypothesis=TOY_HYPOTHESES[label][i], label=label)
        for i, p in enumerate(TOY_PREMISES)
        for label in ("entailment", "neutral", "contradiction")
    ]
