"""The built-in synthetic NLI corpus: small, offline, with planted artifacts of known ground truth.

zdebias must run its main job with no data and no network, so the demo recipe starts from this
corpus. It is produced by a tiny grammar of scenes ("A tall man in a red hat is reading a book
while a woman is sleeping in the park.") whose labels follow fixed rules:

- *entailment*: the hypothesis restates part of the scene (a person, their action, the place),
  possibly with a more general word (``person``, ``playing an instrument``, ``outdoors``);
- *neutral*: it adds a detail the scene does not settle (an adjective, a purpose, a place, an
  attribute of the other person);
- *contradiction*: it gives a person another action, the scene another kind of place, or
  clothes of another colour.

Train and dev are built with three **planted artifacts** (:data:`PLANTED`), the kind GD-NLI
reports on SNLI: the word ``sleeping`` gives contradiction away, the word ``tall`` gives neutral
away, and a hypothesis made only of premise words (full lexical overlap) gives entailment away.
Each is a strong but imperfect correlation: counter-examples exist, so z-filtering can balance
them. The test split is drawn from the same grammar without any preference and then
*quota-balanced*: for every combination of the planted features (and the overlap and length
bins) it holds exactly as many examples of each label, so no planted feature says anything about
the label there (p̂(l|x) = 1/3, z = 0). A model that learnt the shortcuts loses accuracy on it.

>>> splits = make_demo_corpus(seed=0, n_train=300, n_dev=60, n_test=90)   # doctest: +SKIP
>>> write_demo_corpus("demo-data/", seed=0)                               # doctest: +SKIP
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.data.writers import write_json, write_records
from zdebias.settings import DEFAULT_SEED, Settings, setting

LABELS = ("entailment", "neutral", "contradiction")

#: The planted artifacts (ground truth): feature name (as the stats report names it) → label.
PLANTED: dict[str, str] = {
    "sleeping@hypothesis": "contradiction",
    "tall@hypothesis": "neutral",
    "full-lex-overlap": "entailment",
}
PLANTED_DESCRIPTIONS: dict[str, str] = {
    "sleeping@hypothesis": "contradictions mostly replace the action with 'sleeping'",
    "tall@hypothesis": "neutral hypotheses mostly add the adjective 'tall'",
    "full-lex-overlap": "entailments mostly copy premise words only",
}

# --------------------------------------------------------------------------- the grammar

_SUBJECTS = {
    "man": "person",
    "woman": "person",
    "boy": "child",
    "girl": "child",
    "chef": "person",
    "farmer": "person",
    "student": "person",
    "doctor": "person",
    "teacher": "person",
    "driver": "person",
    "nurse": "person",
    "artist": "person",
}
#: action → more general action (an entailed paraphrase).
_ACTIONS = {
    "playing a guitar": "playing an instrument",
    "playing a violin": "playing an instrument",
    "playing a piano": "playing an instrument",
    "reading a book": "reading",
    "reading a newspaper": "reading",
    "eating an apple": "eating",
    "eating a sandwich": "eating",
    "riding a bike": "riding something",
    "riding a horse": "riding an animal",
    "painting a fence": "painting",
    "kicking a ball": "playing with a ball",
    "drinking coffee": "drinking something",
    "writing a letter": "writing",
    "walking a dog": "walking an animal",
    "climbing a tree": "climbing",
    "cooking dinner": "cooking",
    "washing a car": "cleaning something",
    "singing a song": "singing",
    "carrying a box": "carrying something",
    "sleeping": "resting",
}
_SLEEP = "sleeping"
_ADJECTIVES = ("young", "old", "happy", "tired", "tall")
_TALL = "tall"
_COLOURS = ("red", "blue", "green", "yellow", "black", "white")
_CLOTHES = ("shirt", "hat", "jacket", "coat", "scarf")
_PLACES = {
    "in the park": "outdoors",
    "on the beach": "outdoors",
    "on a street": "outdoors",
    "in a garden": "outdoors",
    "in a field": "outdoors",
    "in a kitchen": "indoors",
    "in an office": "indoors",
    "in a library": "indoors",
    "in a classroom": "indoors",
    "in a hallway": "indoors",
}
_PURPOSES = ("for fun", "for money", "for a class", "for a friend", "before lunch", "after work")


@dataclass(frozen=True)
class _Person:
    subject: str
    action: str
    adjective: str | None = None
    clothes: tuple[str, str] | None = None  # (colour, item)
    purpose: str | None = None

    def render(self) -> str:
        first = self.adjective or self.subject
        words = ["an" if first[0] in "aeiou" else "a"]
        if self.adjective:
            words.append(self.adjective)
        words.append(self.subject)
        if self.clothes:
            words += ["in a", *self.clothes]
        words += ["is", self.action]
        if self.purpose:
            words.append(self.purpose)
        return " ".join(words)


@dataclass(frozen=True)
class _Scene:
    people: tuple[_Person, ...]
    place: str | None = None

    def render(self) -> str:
        text = self.people[0].render()
        if len(self.people) > 1:
            text += " while " + self.people[1].render()
        if self.place:
            text += " " + self.place
        return _sentence(text)


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


@dataclass
class _Profile:
    """How a split is drawn: premise shape and how often each construction is used."""

    two_people: float
    adjective: float
    clothes: float
    place: float
    purpose: float
    #: weight of "tall" among adjectives in premises, and of "sleeping" among premise actions
    tall_in_premise: float
    sleep_in_premise: float
    constructions: dict[str, dict[str, float]] = field(default_factory=dict)
    #: share of planted choices: "tall" as the added adjective, "sleeping" as the new action
    tall_added: float = 0.2
    sleep_added: float = 1 / len(_ACTIONS)


# How train/dev (biased) and test (unbiased) are drawn, side by side: setting → (biased,
# unbiased). Train and dev prefer the planted words and constructions; the test split does not.
#: the premise's shape: how often a scene has two people, an adjective, clothes, a place, a purpose
_SCENE_SHARES: dict[str, tuple[float, float]] = {
    "two_people": (0.15, 0.5),
    "adjective": (0.25, 0.5),
    "clothes": (0.3, 0.4),
    "place": (0.6, 0.6),
    "purpose": (0.2, 0.3),
}
#: the planted words: "tall" / "sleeping" in premises, and as the added adjective / new action
_PLANTED_SHARES: dict[str, tuple[float, float]] = {
    "tall_in_premise": (0.25, 0.4),
    "sleep_in_premise": (0.05, 0.3),
    "tall_added": (0.85, 0.3),
    "sleep_added": (0.8, 0.3),
}
#: the constructions of each label (see :func:`_construct`)
_CONSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "entailment": ("copy", "general-subject", "general-action", "place-type"),
    "neutral": ("add-adjective", "add-purpose", "add-place", "transfer-attribute"),
    "contradiction": ("other-action", "other-place", "swap-action", "other-clothes"),
}
#: their weights, in the same order: label → (biased, unbiased)
_CONSTRUCTION_WEIGHTS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "entailment": ((0.72, 0.1, 0.1, 0.08), (0.4, 0.2, 0.2, 0.2)),
    "neutral": ((0.5, 0.22, 0.18, 0.1), (0.25, 0.25, 0.2, 0.3)),
    "contradiction": ((0.62, 0.14, 0.1, 0.14), (0.3, 0.2, 0.3, 0.2)),
}


def _profile(column: int) -> _Profile:
    """The profile of one column of the tables above (0: biased, 1: unbiased)."""
    constructions = {
        label: dict(zip(names, _CONSTRUCTION_WEIGHTS[label][column], strict=True))
        for label, names in _CONSTRUCTIONS.items()
    }
    shares = {**_SCENE_SHARES, **_PLANTED_SHARES}
    settings = {key: values[column] for key, values in shares.items()}
    return _Profile(**settings, constructions=constructions)


_BIASED = _profile(0)
_UNBIASED = _profile(1)


def _person(rng: random.Random, p: _Profile, exclude: str | None = None) -> _Person:
    subjects = [s for s in _SUBJECTS if s != exclude]
    subject = rng.choice(subjects)
    if rng.random() < p.sleep_in_premise:
        action = _SLEEP
    else:
        action = rng.choice([a for a in _ACTIONS if a != _SLEEP])
    adjective = None
    if rng.random() < p.adjective:
        adjective = (
            _TALL
            if rng.random() < p.tall_in_premise
            else rng.choice([a for a in _ADJECTIVES if a != _TALL])
        )
    clothes = (rng.choice(_COLOURS), rng.choice(_CLOTHES)) if rng.random() < p.clothes else None
    purpose = rng.choice(_PURPOSES) if action != _SLEEP and rng.random() < p.purpose else None
    return _Person(subject, action, adjective, clothes, purpose)


def _scene(rng: random.Random, p: _Profile) -> _Scene:
    first = _person(rng, p)
    people = [first]
    if rng.random() < p.two_people:
        people.append(_person(rng, p, exclude=first.subject))
    place = rng.choice(list(_PLACES)) if rng.random() < p.place else None
    return _Scene(tuple(people), place)


def _plain(person: _Person, rng: random.Random | None = None) -> _Person:
    """Subject and action only; with ``rng``, keeps the adjective half of the time."""
    keep = rng is not None and rng.random() < 0.5
    return _Person(person.subject, person.action, person.adjective if keep else None)


def _general(person: _Person, rng: random.Random, share: float = 0.3) -> _Person:
    """The person with the more general action a ``share`` of the time (a neutral or
    contradicting hypothesis may word its action generally too, so such words are no cue)."""
    if person.action in _ACTIONS and person.action != _SLEEP and rng.random() < share:
        return replace(person, action=_ACTIONS[person.action])
    return person


def _hyp(person: _Person, place: str | None = None, *, extra: str | None = None) -> str:
    text = person.render()
    if extra:
        text += " " + extra
    if place:
        text += " " + place
    return _sentence(text)


def _construct(name: str, scene: _Scene, rng: random.Random, p: _Profile) -> str | None:
    """The hypothesis of one construction for a scene, or None where it does not apply."""
    who = rng.randrange(len(scene.people))
    person = scene.people[who]
    other = scene.people[1 - who] if len(scene.people) > 1 else None
    if name == "copy":  # entailment, every word from the premise
        kept = _Person(
            person.subject,
            person.action,
            person.adjective if rng.random() < 0.5 else None,
            person.clothes if rng.random() < 0.3 else None,
            person.purpose if rng.random() < 0.3 else None,
        )
        return _hyp(kept, scene.place if rng.random() < 0.5 else None)
    if name == "general-subject":
        general = _SUBJECTS[person.subject]
        return _hyp(_Person(general, person.action), scene.place if rng.random() < 0.3 else None)
    if name == "general-action":
        return _hyp(_Person(person.subject, _ACTIONS[person.action], person.adjective))
    if name == "place-type":
        if scene.place is None:
            return None
        return _hyp(replace(_plain(person, rng), action=_PLACES[scene.place]))
    if name == "add-adjective":
        if person.adjective is not None:
            return None
        adjective = (
            _TALL
            if rng.random() < p.tall_added
            else rng.choice([a for a in _ADJECTIVES if a != _TALL])
        )
        return _hyp(replace(_general(_plain(person), rng), adjective=adjective))
    if name == "add-purpose":
        if person.purpose is not None or person.action == _SLEEP:
            return None
        return _hyp(_general(_plain(person, rng), rng), extra=rng.choice(_PURPOSES))
    if name == "add-place":
        if scene.place is not None:
            return None
        return _hyp(_plain(person, rng), rng.choice(list(_PLACES)))
    if name == "transfer-attribute":  # neutral, every word from the premise
        if other is None:
            return None
        if other.adjective and not person.adjective:
            return _hyp(replace(_plain(person), adjective=other.adjective))
        if other.clothes and not person.clothes:
            return _hyp(replace(_plain(person), clothes=other.clothes))
        return None
    if name == "other-action":
        choices = [a for a in _ACTIONS if a not in {x.action for x in scene.people}]
        if _SLEEP in choices and rng.random() < p.sleep_added:
            action = _SLEEP
        else:
            action = rng.choice([a for a in choices if a != _SLEEP])
        changed = _general(replace(_plain(person, rng), action=action), rng)
        return _hyp(changed, scene.place if rng.random() < 0.3 else None)
    if name == "other-place":
        if scene.place is None:
            return None
        kind = _PLACES[scene.place]
        if rng.random() < 0.3:  # "A man is indoors." when the scene is outdoors
            other_kind = "indoors" if kind == "outdoors" else "outdoors"
            return _hyp(replace(_plain(person, rng), action=other_kind))
        place = rng.choice([q for q, k in _PLACES.items() if k != kind])
        return _hyp(_plain(person, rng), place)
    if name == "swap-action":  # contradiction, every word from the premise
        if other is None or other.action == person.action:
            return None
        return _hyp(replace(_plain(person, rng), action=other.action))
    if name == "other-clothes":
        if person.clothes is None:
            return None
        colour = rng.choice([c for c in _COLOURS if c != person.clothes[0]])
        return _hyp(replace(_plain(person, rng), clothes=(colour, person.clothes[1])))
    raise ValueError(f"unknown construction {name!r}")


def _draw(rng: random.Random, p: _Profile, label: str) -> tuple[str, str, str]:
    """One (premise, hypothesis, construction) of the given label."""
    weights = p.constructions[label]
    names, probs = list(weights), list(weights.values())
    while True:
        scene = _scene(rng, p)
        name = rng.choices(names, probs)[0]
        hypothesis = _construct(name, scene, rng, p)
        if hypothesis is not None:
            return scene.render(), hypothesis, name


# --------------------------------------------------------------------------- features

#: a word as the features' default tokenizer finds it in ASCII text
#: (:func:`zdebias.features.tokenize.tokenize`; the grammar is ASCII, and a test keeps the two
#: equal on the corpus)
WORD_RE = re.compile(r"\w+(?:'\w+)?")


def words(text: str) -> list[str]:
    """The lower-cased words of a sentence of the grammar, as the features see them."""
    return WORD_RE.findall(text.lower())


def overlap(premise: str, hypothesis: str) -> float:
    """Share of hypothesis tokens that occur in the premise (docs/design.md §2 lexical overlap)."""
    hyp = words(hypothesis)
    prem = set(words(premise))
    return sum(t in prem for t in hyp) / len(hyp) if hyp else 0.0


def planted_features(premise: str, hypothesis: str) -> list[str]:
    """The planted artifact features an example carries (names as in :data:`PLANTED`)."""
    tokens = set(words(hypothesis))
    out = [f for f in ("sleeping@hypothesis", "tall@hypothesis") if f.split("@")[0] in tokens]
    if overlap(premise, hypothesis) == 1.0:
        out.append("full-lex-overlap")
    return out


def _signature(premise: str, hypothesis: str) -> tuple[Any, ...]:
    """The cell an example falls in for quota balancing: planted features + overlap/len bins."""
    ov = overlap(premise, hypothesis)
    ov_bin = 3 if ov == 1.0 else 2 if ov > 0.8 else 1 if ov > 0.5 else 0
    n = len(words(hypothesis))
    len_bin = 0 if n < 5 else 1 if n < 10 else 2
    return (*sorted(planted_features(premise, hypothesis)), ov_bin, len_bin)


def _record(split: str, i: int, premise: str, hypothesis: str, label: str, name: str) -> Record:
    return Record(
        id=f"demo-{split}-{i}",
        label=label,
        premise=premise,
        hypothesis=hypothesis,
        meta={
            "source": "demo",
            "type": "original",
            "construction": name,
            "planted": planted_features(premise, hypothesis),
        },
    )


def _biased_split(split: str, n: int, rng: random.Random) -> list[Record]:
    records = []
    for i in range(n):
        label = LABELS[i % 3]
        premise, hypothesis, name = _draw(rng, _BIASED, label)
        records.append(_record(split, i, premise, hypothesis, label, name))
    rng.shuffle(records)
    return records


def _balanced_split(split: str, n: int, rng: random.Random) -> list[Record]:
    """``n`` (rounded down to a multiple of 3) examples, label-balanced within every cell."""
    n_triplets = n // 3
    cells: dict[tuple[Any, ...], dict[str, list[tuple[str, str, str]]]] = defaultdict(
        lambda: {label: [] for label in LABELS}
    )
    triplets: list[tuple[tuple[str, str, str], ...]] = []
    seen: set[tuple[str, str]] = set()
    attempts = 0
    while len(triplets) < n_triplets:
        attempts += 1
        if attempts > 200 * n + 10_000:
            raise RuntimeError("could not balance the demo test split")  # pragma: no cover
        label = LABELS[attempts % 3]
        premise, hypothesis, name = _draw(rng, _UNBIASED, label)
        if (premise, hypothesis) in seen:
            continue
        seen.add((premise, hypothesis))
        cell = cells[_signature(premise, hypothesis)]
        cell[label].append((premise, hypothesis, name))
        if all(cell[x] for x in LABELS):
            triplets.append(tuple(cell[x].pop(0) for x in LABELS))
    records = []
    for t, triplet in enumerate(triplets):
        for label, (premise, hypothesis, name) in zip(LABELS, triplet, strict=True):
            records.append(
                _record(split, 3 * t + LABELS.index(label), premise, hypothesis, label, name)
            )
    rng.shuffle(records)
    return records


def make_demo_corpus(
    *, seed: int = 0, n_train: int = 1500, n_dev: int = 300, n_test: int = 600
) -> dict[str, list[Record]]:
    """The three splits: ``train`` and ``dev`` with planted artifacts, ``test`` without.

    Deterministic for a seed. ``test`` has ``n_test // 3 * 3`` examples, equally many of each
    label inside every combination of planted features, overlap bin and length bin.
    """
    rng = random.Random(seed)
    return {
        "train": _biased_split("train", n_train, random.Random(rng.random())),
        "dev": _biased_split("dev", n_dev, random.Random(rng.random())),
        "test": _balanced_split("test", n_test, random.Random(rng.random())),
    }


def planted_table(records: list[Record]) -> dict[str, dict[str, Any]]:
    """Per planted feature: how many examples carry it and their label counts."""
    out: dict[str, dict[str, Any]] = {}
    for feature, label in PLANTED.items():
        counts: Counter[str] = Counter()
        for record in records:
            if feature in planted_features(record.premise or "", record.hypothesis or ""):
                counts[record.label] += 1
        n = sum(counts.values())
        out[feature] = {
            "label": label,
            "n": n,
            "label_counts": {x: counts.get(x, 0) for x in LABELS},
            "p_label": round(counts.get(label, 0) / n, 4) if n else None,
        }
    return out


def artifact_subsets(records: list[Record]) -> dict[str, list[Record]]:
    """``hard``: records with a planted feature that points to another label than theirs;
    ``easy``: records with a planted feature that points to their own label. A model that
    relies on the artifacts does worse on ``hard`` than on ``easy``."""
    hard, easy = [], []
    for r in records:
        points_to = {PLANTED[f] for f in planted_features(r.premise or "", r.hypothesis or "")}
        if points_to - {r.label}:
            hard.append(r)
        if r.label in points_to:
            easy.append(r)
    return {"hard": hard, "easy": easy}


class DemoDataSettings(Settings):
    """Size and seed of the built-in synthetic corpus."""

    seed: int = setting(DEFAULT_SEED, "Random seed.")
    n_train: int = setting(1500, "Training examples.", ge=30)
    n_dev: int = setting(300, "Dev examples.", ge=3)
    n_test: int = setting(600, "Test examples (a multiple of 3 is used).", ge=3)


def write_demo_corpus(
    out_dir: str | Path, settings: DemoDataSettings | None = None, **overrides: Any
) -> dict[str, Any]:
    """Write ``train.jsonl``, ``dev.jsonl``, ``test.jsonl``, the test subsets
    ``test_hard.jsonl`` and ``test_easy.jsonl`` (:func:`artifact_subsets`) and
    ``artifacts.json`` (ground truth).

    Returns the ``artifacts.json`` content: the planted features, their labels, and how
    strongly each split carries them.
    """
    out = Path(out_dir)
    cfg = DemoDataSettings.of(settings, **overrides)
    splits = make_demo_corpus(
        seed=cfg.seed, n_train=cfg.n_train, n_dev=cfg.n_dev, n_test=cfg.n_test
    )
    subsets = artifact_subsets(splits["test"])
    splits = {**splits, "test_hard": subsets["hard"], "test_easy": subsets["easy"]}
    for name, records in splits.items():
        write_records(records, out / f"{name}.jsonl")
    info = {
        "seed": cfg.seed,
        "sizes": {name: len(records) for name, records in splits.items()},
        "planted": [
            {"feature": f, "label": label, "description": PLANTED_DESCRIPTIONS[f]}
            for f, label in PLANTED.items()
        ],
        "per_split": {name: planted_table(records) for name, records in splits.items()},
    }
    write_json(info, out / "artifacts.json")
    return info
