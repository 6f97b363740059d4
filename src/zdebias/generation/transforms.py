"""Rule-made transforms of real pairs for the HANS heuristics (docs/design.md §12; Min et al. 2020).

Each rule rewrites a D0 premise into a new hypothesis and sets the label the rule implies;
the premise stays as it was. Plain text rules, no parser: each accepts only the simple
sentence shapes it can rewrite correctly and refuses everything else with a counted reason.

==============  ==========================================================  =============
rule            what it does                                                label
==============  ==========================================================  =============
inversion       swap subject and object: "A man is holding a dog." →        neutral [1]_
                "A dog is holding a man." (HANS lexical overlap)
passive         "A man is holding a dog." → "A dog is being held by a man."  entailment
drop-modifier   drop one colour/size/age adjective, else the subject's PP,  entailment
                else a final place PP: "A young man is sleeping on a bench."
                → "A man is sleeping on a bench." (HANS subsequence, the
                entailed side)
subsequence     the noun of a PP on the subject becomes the subject:        neutral [1]_
                "The man near the dog is sleeping." → "The dog is
                sleeping." (HANS sn_PP_on_subject)
==============  ==========================================================  =============

.. [1] ``non_entailment_label``: HANS has two classes and maps neutral + contradiction to
   non-entailment. The inverted or cut sentence is not implied by the premise, but it is not
   false in every scene where the premise holds (the dog may also hold the man), so the
   3-way label is ``neutral`` by default; ``contradiction`` is the other choice.

Shapes (a NP is a determiner, then 1-4 plain words, the last its head noun)::

    NP (is|are|was|were) V-ing NP [tail]      NP V-s NP [tail]      (inversion, passive)

where the tail starts with a preposition, an adverb or a comma; inversion and passive drop it
(an adjunct: dropping it keeps an entailment entailed, and a PP there may modify the object,
which would then move with the wrong noun), and check only what they keep. Refused: questions,
negation and other downward-entailing words (``not``, ``no``, ``without``, ``every``,
``only`` ...), commas and coordination (``and``, ``or``, ``but``), pronoun subjects, and
verbs whose inversion is entailed (symmetric: ``hugging``, ``meeting`` ...) or whose
passive is not English (``having``, ``getting`` ...).

>>> invert("A man is holding a dog.").hypothesis
'A dog is holding a man.'
>>> passivise("Two women are carrying a box in the rain.").hypothesis
'A box is being carried by two women.'
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from zdebias.data.labels import get_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.settings import DEFAULT_SEED, Settings, setting
from zdebias.stats.cells import Cell, cells_filled

ENTAILMENT = "entailment"


def _words(text: str) -> frozenset[str]:
    """A word list written as one string."""
    return frozenset(text.split())


DETERMINERS = _words("a an the one two three four five six seven eight nine ten several some many")
PLURAL_DETERMINERS = _words("two three four five six seven eight nine ten several some many")
PREPOSITIONS = _words(
    "in on at near by with under over inside outside behind beside beneath above across "
    "along around through into onto toward towards from for of to against down up past "
    "between among during while as who that which where when"
)
ADVERBS = _words(
    "outside inside outdoors indoors together alone away up down there here again "
    "happily quickly slowly nearby"
)
PRONOUNS = _words("he she it they we i you someone somebody everyone this these those")
DOWNWARD = _words(
    "not no never without nobody nothing none neither nor few only every all each any except"
)
COORDINATION = _words("and or but")
AUXILIARIES = {
    "is": (False, False),
    "are": (True, False),
    "was": (False, True),
    "were": (True, True),
}
IRREGULAR_PLURALS = _words("men women children people feet teeth mice geese police")
#: verbs whose subject/object swap is entailed (or nearly): inversion refuses them
SYMMETRIC = _words(
    "hug kiss meet marry date fight wrestle touch face resemble embrace battle race greet "
    "chat talk dance"
)
#: transitive-looking verbs with no English passive: passivisation refuses them
NO_PASSIVE = _words("have be get become resemble lack cost weigh face")
#: colour, size and age adjectives: subsective, so dropping one is entailed ("a young man"
#: is a man). Others are left alone: "a toy gun" is not a gun, "a former champion" not a
#: champion (NON_SUBSECTIVE is checked too, for a word added here by mistake)
DROPPABLE = _words(
    "red blue green yellow black white orange pink purple brown gray grey "
    "young old older little small big large tall short elderly smiling happy "
    "blond blonde dark-haired bald muddy wet"
)
NON_SUBSECTIVE = _words(
    "fake former toy artificial alleged imaginary fictional counterfeit mock pretend "
    "would-be stuffed plastic model cartoon virtual false"
)
#: a place PP at the end of a sentence may be dropped (an adjunct); others may be arguments
#: words after an object's head that make it no plain NP ("a cart full of food")
POSTNOMINAL = _words("full high piled filled covered loaded made dressed")
PLACE_PREPOSITIONS = _words("in on at near under inside behind beside")
#: -ing forms of irregular verbs → past participle; keyed by base form
IRREGULAR_PARTICIPLES = {
    "bear": "borne", "beat": "beaten", "bite": "bitten", "blow": "blown", "break": "broken",
    "bring": "brought", "build": "built", "buy": "bought", "catch": "caught",
    "choose": "chosen", "cut": "cut", "dig": "dug", "do": "done", "draw": "drawn",
    "drink": "drunk", "drive": "driven", "eat": "eaten", "feed": "fed", "feel": "felt",
    "fight": "fought", "find": "found", "fly": "flown", "freeze": "frozen", "give": "given",
    "grind": "ground", "hang": "hung", "hear": "heard", "hide": "hidden", "hit": "hit",
    "hold": "held", "keep": "kept", "lay": "laid", "lead": "led", "leave": "left",
    "lend": "lent", "light": "lit", "lose": "lost", "make": "made", "meet": "met",
    "pay": "paid", "put": "put", "read": "read", "ride": "ridden", "ring": "rung",
    "run": "run", "say": "said", "see": "seen", "sell": "sold", "send": "sent",
    "set": "set", "sew": "sewn", "shake": "shaken", "shoot": "shot", "show": "shown",
    "shut": "shut", "sing": "sung", "sink": "sunk", "slide": "slid", "speak": "spoken",
    "spend": "spent", "spin": "spun", "split": "split", "spread": "spread",
    "steal": "stolen", "stick": "stuck", "strike": "struck", "sweep": "swept",
    "swing": "swung", "take": "taken", "teach": "taught", "tear": "torn", "tell": "told",
    "throw": "thrown", "tie": "tied", "wear": "worn", "weave": "woven", "win": "won",
    "wind": "wound", "write": "written",
}  # fmt: skip
_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*$")
_VOWELS = "aeiou"


@dataclass(frozen=True)
class Transformed:
    """A rule's output: the new pair, the label the rule implies, and what it changed."""

    premise: str
    hypothesis: str
    label: str
    edit: str


@dataclass(frozen=True)
class Skipped:
    """A rule's refusal, with the reason (counted in the summary)."""

    reason: str


Outcome = Transformed | Skipped


# --------------------------------------------------------------------------- sentences


@dataclass(frozen=True)
class _Sentence:
    words: list[str]
    end: str  # the final punctuation, "" when none


def _sentence(text: str, *, whole: bool = True) -> _Sentence | Skipped:
    """The words of a simple declarative sentence (commas as words), or why the rules
    leave it alone. ``whole=False``: only the question check here; the caller checks the
    words it keeps with :func:`_refusal`."""
    text = " ".join(text.replace(",", " , ").split())
    if "?" in text:
        return Skipped("question")
    end = text[-1] if text and text[-1] in ".!" else ""
    words = (text[:-1] if end else text).split()
    if not words:
        return Skipped("not_plain_words")
    if whole and (why := _refusal(words)) is not None:
        return why
    return _Sentence(words, end)


def _refusal(words: list[str]) -> Skipped | None:
    """Why the rules may not touch these words: negation, coordination, odd tokens, a
    pronoun subject; None when they may."""
    lower = [w.lower() for w in words]
    if any(w in DOWNWARD or w.endswith("n't") for w in lower):
        return Skipped("negation")
    if any(w in COORDINATION or w in (",", ";") for w in lower):
        return Skipped("coordination")
    if not all(_WORD.match(w) for w in words):
        return Skipped("not_plain_words")
    if lower[0] in PRONOUNS:
        return Skipped("pronoun_subject")
    return None


def _np_end(words: list[str], start: int, *, max_len: int = 4) -> int | None:
    """The index after the NP starting at ``start`` (a determiner, then 1-``max_len``
    words up to a preposition, an adverb or the end), or None."""
    if start >= len(words) or words[start].lower() not in DETERMINERS:
        return None
    i = start + 1
    while i < len(words) and not _boundary(words[i]):
        i += 1
    if not 1 <= i - start - 1 <= max_len or _is_ing(words[i - 1]):
        return None  # an -ing word is no head noun: "a man kite surfing"
    return i


def _boundary(word: str) -> bool:
    w = word.lower()
    return w in PREPOSITIONS or w in ADVERBS or w in AUXILIARIES or w in DETERMINERS or w == ","


def _is_plural(np: list[str]) -> bool:
    det, head = np[0].lower(), np[-1].lower()
    if det in PLURAL_DETERMINERS:
        return True
    if det in ("a", "an", "one"):
        return False
    return head in IRREGULAR_PLURALS or (head.endswith("s") and not head.endswith("ss"))


def _lower_det(np: list[str]) -> list[str]:
    return [np[0].lower(), *np[1:]]


def _text(words: list[str], end: str) -> str:
    out = " ".join(words)
    return out[:1].upper() + out[1:] + end


def _article(next_word: str) -> str:
    w = next_word.lower()
    vowel = w[:1] in _VOWELS and not w.startswith(("uni", "use", "one", "eu"))
    return "an" if vowel or w.startswith(("hour", "honest")) else "a"


@dataclass(frozen=True)
class _Clause:
    """``subject verb object tail``, with the verb's form."""

    subject: list[str]
    aux: str | None  # is/are/was/were for the progressive, None for the present -s form
    verb: str
    obj: list[str]
    tail: list[str]
    end: str


def _clause(text: str) -> _Clause | Skipped:
    """NP (aux V-ing | V-s) NP tail, or why not."""
    s = _sentence(text, whole=False)
    if isinstance(s, Skipped):
        return s
    words = s.words
    first = words.index(",") if "," in words else len(words)
    if (why := _refusal(words[:first])) is not None:
        return why  # what comes after a comma is tail at best, and is dropped
    subject_end = _np_end(words, 0)
    if subject_end is None:
        return Skipped("no_subject_np")
    i = subject_end
    aux = None
    if i < len(words) and words[i].lower() in AUXILIARIES:
        aux = words[i].lower()
        i += 1
        if i >= len(words) or not _is_ing(words[i]):
            return Skipped("no_progressive_verb")
    elif (  # "A boy plays a guitar": the NP ran on to the -s verb before the determiner
        i < len(words)
        and i >= 3
        and words[i].lower() in DETERMINERS
        and _is_third_person(words[i - 1])
        and not _is_plural(words[: i - 1])
    ):
        subject_end = i = i - 1
    else:
        return Skipped("no_verb")
    verb = words[i].lower()
    obj_end = _np_end(words, i + 1, max_len=3)
    obj = [w.lower() for w in words[i + 1 : obj_end or i + 1]]
    if obj_end is None or obj[-1] in DROPPABLE or POSTNOMINAL.intersection(obj):
        return Skipped("no_object_np")  # none, or "painting a room red"
    tail = words[obj_end:]
    if tail and tail[0].lower() not in PREPOSITIONS | ADVERBS | {","}:
        return Skipped("no_object_np")
    return _Clause(words[:subject_end], aux, verb, words[i + 1 : obj_end], tail, s.end)


def _is_ing(word: str) -> bool:
    w = word.lower()
    return len(w) > 4 and w.endswith("ing") and w != "being"


def _is_third_person(word: str) -> bool:
    w = word.lower()
    return (
        len(w) > 2
        and w.endswith("s")
        and not w.endswith(("ss", "us", "is"))
        and w not in PREPOSITIONS
    )


def _base(verb: str) -> list[str]:
    """Candidate base forms of an -ing or third-person -s verb, most likely first."""
    if verb.endswith("ing"):
        stem = verb[:-3]
        out = [stem, stem + "e"]
        if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls":
            out.insert(0, stem[:-1])  # running → run
        return out
    if verb == "has":
        return ["have"]
    if verb.endswith("ies"):
        return [verb[:-3] + "y"]
    if verb.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return [verb[:-2]]
    return [verb[:-1]]


def _participle(verb: str) -> str:
    """The past participle of an -ing or -s verb: the irregular table, else the regular
    rule (from the -ing stem, whose spelling already shows e-drop and doubling)."""
    for base in _base(verb):
        if base in IRREGULAR_PARTICIPLES:
            return IRREGULAR_PARTICIPLES[base]
    if verb.endswith("ing"):
        stem = verb[:-3]
        if stem.endswith("ee"):
            return stem + "d"
        if len(stem) > 1 and stem[-1] == "y" and stem[-2] not in _VOWELS:
            return stem[:-1] + "ied"
        return stem + "ed"
    base = _base(verb)[0]
    if base.endswith("e"):
        return base + "d"
    if len(base) > 1 and base[-1] == "y" and base[-2] not in _VOWELS:
        return base[:-1] + "ied"
    if _one_syllable_cvc(base):
        return base + base[-1] + "ed"
    return base + "ed"


def _one_syllable_cvc(word: str) -> bool:
    groups = re.findall(r"[aeiou]+", word)
    return (
        len(groups) == 1
        and len(word) >= 3
        and word[-1] not in _VOWELS + "wxy"
        and word[-2] in _VOWELS
        and word[-3] not in _VOWELS
    )


def _lemma(verb: str) -> str:
    """The most likely base form (for the verb lists); -ing forms also try e-drop."""
    cands = _base(verb)
    for c in cands:
        if c in SYMMETRIC or c in NO_PASSIVE or c in IRREGULAR_PARTICIPLES:
            return c
    return cands[0]


def _aux(plural: bool, past: bool) -> str:
    return ("were" if plural else "was") if past else ("are" if plural else "is")


# --------------------------------------------------------------------------- the rules


def invert(premise: str, *, label: str = "neutral") -> Outcome:
    """Swap subject and object: "A man is holding a dog." → "A dog is holding a man."

    Not implied by the premise (HANS lexical overlap, subject/object swap); ``label`` is
    the 3-way label for that (neutral by default)."""
    c = _clause(premise)
    if isinstance(c, Skipped):
        return c
    if _lemma(c.verb) in SYMMETRIC:
        return Skipped("symmetric_verb")
    new_subject, new_object = c.obj, _lower_det(c.subject)
    plural = _is_plural(new_subject)
    if c.aux is not None:
        verb = [_aux(plural, AUXILIARIES[c.aux][1]), c.verb]
    else:
        verb = [_base(c.verb)[0] if plural else c.verb]
    words = [*new_subject, *verb, *new_object]
    return Transformed(
        premise, _text(words, c.end), label, f"swap {' '.join(c.subject)} / {' '.join(c.obj)}"
    )


def passivise(premise: str) -> Outcome:
    """Passive voice: "A man is holding a dog." → "A dog is being held by a man."
    (entailment: the same event)."""
    c = _clause(premise)
    if isinstance(c, Skipped):
        return c
    if _lemma(c.verb) in NO_PASSIVE:
        return Skipped("no_passive")
    plural = _is_plural(c.obj)
    past = AUXILIARIES[c.aux][1] if c.aux is not None else False
    aux = [_aux(plural, past), "being"] if c.aux is not None else [_aux(plural, past)]
    participle = _participle(c.verb)
    words = [*c.obj, *aux, participle, "by", *_lower_det(c.subject)]
    return Transformed(premise, _text(words, c.end), ENTAILMENT, f"passive {participle}")


def drop_modifier(premise: str) -> Outcome:
    """Drop one modifier (entailment): a colour/size/age adjective in a NP ("A young man"
    → "A man"), else the PP on the subject ("A man in a red shirt is sleeping." → "A man
    is sleeping."), else a final place PP ("... sleeping on a bench." → "... sleeping.").
    Never a non-subsective adjective ("toy", "fake", "former": NON_SUBSECTIVE)."""
    s = _sentence(premise)
    if isinstance(s, Skipped):
        return s
    words, lower = s.words, [w.lower() for w in s.words]
    for i, w in enumerate(lower[1:-1], start=1):
        prev_ok = lower[i - 1] in DETERMINERS or lower[i - 1] in DROPPABLE
        nxt = lower[i + 1]
        if w in DROPPABLE and w not in NON_SUBSECTIVE and prev_ok and not _boundary(nxt):
            if nxt in NON_SUBSECTIVE:
                continue
            out = words[:i] + words[i + 1 :]
            if lower[i - 1] in ("a", "an"):
                art = _article(out[i])
                out[i - 1] = art.capitalize() if words[i - 1][0].isupper() else art
            return Transformed(premise, _text(out, s.end), ENTAILMENT, f"adjective {w}")
    subject_end = _np_end(words, 0)
    if subject_end is not None and lower[subject_end : subject_end + 1] in (["in"], ["with"]):
        pp_end = _np_end(words, subject_end + 1)
        if pp_end is not None and pp_end < len(words) and lower[pp_end] in AUXILIARIES:
            out = words[:subject_end] + words[pp_end:]
            pp = " ".join(words[subject_end:pp_end])
            return Transformed(premise, _text(out, s.end), ENTAILMENT, f"subject PP {pp}")
    for i in range(len(words) - 2, 1, -1):
        if lower[i] in PLACE_PREPOSITIONS and _np_end(words, i + 1, max_len=3) == len(words):
            if i < 3 or lower[i - 1] in PREPOSITIONS | DETERMINERS:
                break
            out = words[:i]
            pp = " ".join(words[i:])
            return Transformed(premise, _text(out, s.end), ENTAILMENT, f"final PP {pp}")
    return Skipped("no_modifier")


def subsequence(premise: str, *, label: str = "neutral") -> Outcome:
    """The noun of a PP on the subject becomes the subject: "The man near the dog is
    sleeping." → "The dog is sleeping." (a subsequence the premise does not imply; HANS
    sn_PP_on_subject); ``label`` as for :func:`invert`."""
    s = _sentence(premise)
    if isinstance(s, Skipped):
        return s
    words, lower = s.words, [w.lower() for w in s.words]
    subject_end = _np_end(words, 0)
    if subject_end is None:
        return Skipped("no_subject_np")
    if subject_end >= len(words) or lower[subject_end] not in PREPOSITIONS - {"of", "to"}:
        return Skipped("no_subject_pp")
    pp_end = _np_end(words, subject_end + 1)
    if pp_end is None or pp_end + 1 >= len(words) or lower[pp_end] not in AUXILIARIES:
        return Skipped("no_subject_pp")
    np = words[subject_end + 1 : pp_end]
    aux = _aux(_is_plural(np), AUXILIARIES[lower[pp_end]][1])
    out = [*np, aux, *words[pp_end + 1 :]]
    return Transformed(premise, _text(out, s.end), label, f"subject {' '.join(np)}")


# --------------------------------------------------------------------------- over a dataset

RULES: dict[str, Callable[..., Outcome]] = {
    "inversion": invert,
    "passive": passivise,
    "drop-modifier": drop_modifier,
    "subsequence": subsequence,
}
#: the rules whose label is the non-entailment label
NON_ENTAILMENT_RULES = ("inversion", "subsequence")
#: the HANS heuristic each rule's pairs belong to (``meta.heuristic``, as HANS records have)
HEURISTICS = {
    "inversion": "lexical_overlap",  # ln_subject/object_swap
    "passive": "lexical_overlap",  # le_passive
    "drop-modifier": "subsequence",  # se_adjective, se_PP_on_obj
    "subsequence": "subsequence",  # sn_PP_on_subject
}


class TransformSettings(Settings):
    """Which rules, on how many source pairs, with which labels."""

    help_panel: ClassVar[str] = "Transforms"

    rules: list[str] = setting(
        default_factory=lambda: list(RULES),
        help="Rules to apply, comma-separated: " + ", ".join(RULES) + ".",
    )
    per_rule: int | None = setting(
        None, "At most this many records per rule (default: every premise it applies to).", ge=1
    )
    non_entailment_label: Literal["neutral", "contradiction"] = setting(
        "neutral", "The 3-way label of inversion and subsequence (HANS: non-entailment)."
    )
    balance: bool = setting(
        False, "Keep as many entailment as non-entailment records (rules take turns)."
    )
    seed: int = setting(DEFAULT_SEED, "Random seed: the order premises are visited in.")

    @field_validator("rules")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [r for r in value if r not in RULES]
        if unknown:
            raise ValueError(f"unknown rule {unknown[0]!r}; valid rules: {', '.join(RULES)}")
        if not value:
            raise ValueError("give at least one rule")
        return list(dict.fromkeys(value))


@dataclass
class TransformResult:
    """The transformed records (rule by rule, each in the seeded order) and the summary."""

    records: list[Record]
    summary: dict[str, Any] = field(default_factory=dict)


def transform_records(
    records: Sequence[Record],
    settings: TransformSettings | None = None,
    *,
    cells: Sequence[Cell] | None = None,
    **overrides: Any,
) -> TransformResult:
    """Apply the rules to the distinct premises of ``records``, visited in a seeded order.

    Every record gets ``id`` ``tf-RULE:SOURCE_ID`` and ``meta`` ``{"type": "transform",
    "rule", "heuristic", "source_id", "edit"}`` (``heuristic``: the HANS heuristic of the
    rule, :data:`HEURISTICS`). With ``cells`` (shortcut-breaking cells, docs/design.md §12), a
    record that fills one (:func:`~zdebias.stats.cells.cells_filled`: the first in order) also gets
    ``meta.cell`` and ``meta.feature``, as a targeted sample does, and the summary counts the
    records per cell. The summary counts per rule: tried, applied, skipped by reason, cut by
    ``per_rule`` (``not_tried``) and by ``balance``."""
    cfg = TransformSettings.of(settings, **overrides)
    if any(r.premise is None for r in records):
        raise ConfigError("transforms need premise/hypothesis pairs (an nli task)")
    seen: set[str] = set()
    sources: list[Record] = []
    for r in records:
        key = " ".join(str(r.premise).lower().split())
        if key not in seen:
            seen.add(key)
            sources.append(r)
    order = list(range(len(sources)))
    random.Random(cfg.seed).shuffle(order)
    by_rule: dict[str, list[Record]] = {}
    per_rule: dict[str, dict[str, Any]] = {}
    for rule in cfg.rules:
        fn = RULES[rule]
        kwargs = {"label": cfg.non_entailment_label} if rule in NON_ENTAILMENT_RULES else {}
        out: list[Record] = []
        skipped: Counter[str] = Counter()
        tried = 0
        for i in order:
            if cfg.per_rule is not None and len(out) >= cfg.per_rule:
                break
            src = sources[i]
            tried += 1
            got = fn(str(src.premise), **kwargs)
            if isinstance(got, Skipped):
                skipped[got.reason] += 1
                continue
            meta = {
                "type": "transform",
                "rule": rule,
                "heuristic": HEURISTICS[rule],
                "source_id": src.id,
                "edit": got.edit,
            }
            out.append(
                Record(f"tf-{rule}:{src.id}", got.label, got.premise, got.hypothesis, None, meta)
            )
        by_rule[rule] = out
        per_rule[rule] = {
            "tried": tried,
            "applied": len(out),
            "skipped": dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))),
            "not_tried": len(sources) - tried,
            "label": out[0].label if out else None,
        }
    if cfg.balance:
        by_rule = _balanced(by_rule, per_rule)
    kept = [r for rule in cfg.rules for r in by_rule[rule]]
    for rule in cfg.rules:
        per_rule[rule]["written"] = len(by_rule[rule])
    labels = Counter(r.label for r in kept)
    summary = {
        "n_sources": len(records),
        "n_distinct_premises": len(sources),
        "n_written": len(kept),
        "labels": dict(sorted(labels.items())),
        "rules": per_rule,
        "settings": cfg.model_dump(),
    }
    if cells is not None:
        kept, summary["cells"] = _tag_cells(kept, cells, labels=get_task("nli").labels)
    return TransformResult(kept, summary)


def _tag_cells(
    records: list[Record], cells: Sequence[Cell], *, labels: Sequence[str]
) -> tuple[list[Record], dict[str, int]]:
    """``records`` with ``meta.cell`` / ``meta.feature`` where they fill a cell, and the
    records per cell (in the cells' order)."""
    filled = cells_filled(records, cells, labels=labels) if records else []
    out, counts = [], Counter[str]()
    for r, cell in zip(records, filled, strict=True):
        if cell is not None:
            counts[cell.key] += 1
            r = r.replace(meta={**r.meta, "cell": cell.key, "feature": cell.feature})
        out.append(r)
    order = list(dict.fromkeys(c.key for c in cells))
    return out, {k: counts[k] for k in order if counts[k]}


def _balanced(
    by_rule: dict[str, list[Record]], per_rule: dict[str, dict[str, Any]]
) -> dict[str, list[Record]]:
    """As many entailment as non-entailment records: within the larger side, the rules take
    turns (round robin, each in its order) until it is as large as the smaller side."""
    sides: dict[bool, list[str]] = {True: [], False: []}
    for rule, recs in by_rule.items():
        sides[bool(recs) and recs[0].label == ENTAILMENT].append(rule)
    size = {k: sum(len(by_rule[r]) for r in v) for k, v in sides.items()}
    n = min(size.values())
    out = dict(by_rule)
    for rules in sides.values():
        take = dict.fromkeys(rules, 0)
        left = n
        while left and any(take[r] < len(by_rule[r]) for r in rules):
            for r in rules:
                if left and take[r] < len(by_rule[r]):
                    take[r] += 1
                    left -= 1
        for r in rules:
            out[r] = by_rule[r][: take[r]]
            per_rule[r]["balanced_out"] = len(by_rule[r]) - take[r]
    return out


def transform_file(
    records: Sequence[Record],
    out: str | Path,
    settings: TransformSettings | None = None,
    *,
    cells: Sequence[Cell] | None = None,
    overwrite: bool = False,
    source: str | None = None,
) -> dict[str, Any]:
    """:func:`transform_records` (``cells``: tag the pairs that fill them), published as the
    folder ``out``: ``transforms.jsonl`` and ``summary.json``; the summary."""
    from zdebias.data.writers import publish_folder, write_files

    result = transform_records(records, settings, cells=cells)
    summary = {"input": source, **result.summary} if source else result.summary

    def build(work: Path) -> dict[str, Any]:
        write_files(work, {"transforms.jsonl": result.records, "summary.json": summary})
        return summary

    return publish_folder(out, build, overwrite=overwrite)


__all__ = [
    "RULES",
    "Outcome",
    "Skipped",
    "TransformResult",
    "TransformSettings",
    "Transformed",
    "drop_modifier",
    "invert",
    "passivise",
    "subsequence",
    "transform_file",
    "transform_records",
]
