"""Rule-made HANS transforms: each rule's exact output and refusals, the summary's counts,
the `transform` command, determinism, and the `transform` stage feeding `combine`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zdebias.cli import main
from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.generation.transforms import (
    RULES,
    Skipped,
    Transformed,
    drop_modifier,
    invert,
    passivise,
    subsequence,
    transform_records,
)
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe


def _hyp(outcome: Transformed | Skipped) -> str:
    assert isinstance(outcome, Transformed), outcome
    return outcome.hypothesis


CASES = {
    "inversion": [
        ("A man is holding a dog.", "A dog is holding a man."),
        ("Two women are carrying a box in the rain.", "A box is carrying two women."),
        ("A man was stopping a car.", "A car was stopping a man."),
        ("A girl is feeding two goats.", "Two goats are feeding a girl."),
        ("A man holds two dogs outside.", "Two dogs hold a man."),
        ("An old man rides a bike.", "A bike rides an old man."),
        ("a man is holding a dog, not a cat", "A dog is holding a man"),
    ],
    "passive": [
        ("A man is holding a dog.", "A dog is being held by a man."),
        ("Two women are carrying a box in the rain.", "A box is being carried by two women."),
        ("The little girl is eating an apple.", "An apple is being eaten by the little girl."),
        ("A man was stopping a car.", "A car was being stopped by a man."),
        ("A boy is hugging two puppies.", "Two puppies are being hugged by a boy."),
        ("A woman is riding a horse.", "A horse is being ridden by a woman."),
        ("A man is chasing a ball.", "A ball is being chased by a man."),
        ("A young boy plays a guitar.", "A guitar is played by a young boy."),
        ("A man holds two dogs outside.", "Two dogs are held by a man."),
        ("A dog carries a stick.", "A stick is carried by a dog."),
        ("A chef grabs a pan.", "A pan is grabbed by a chef."),
    ],
    "drop-modifier": [
        ("A young boy plays a guitar.", "A boy plays a guitar."),
        ("An old woman is riding a scooter.", "A woman is riding a scooter."),
        ("A young elephant is pushing a log", "An elephant is pushing a log"),
        ("A kid with a toy gun is running.", "A kid is running."),
        ("A boy is running in a field.", "A boy is running."),
        ("A dog sleeps near the door.", "A dog sleeps."),
    ],
}
LABELS = {"inversion": "neutral", "passive": "entailment", "drop-modifier": "entailment"}


@pytest.mark.parametrize(
    ("rule", "premise", "expected"), [(k, *case) for k, v in CASES.items() for case in v]
)
def test_rule_output(rule: str, premise: str, expected: str) -> None:
    out = RULES[rule](premise)
    assert _hyp(out) == expected
    assert (out.label, out.premise) == (LABELS[rule], premise)


def test_labels_and_edits() -> None:
    assert invert("A man is holding a dog.", label="contradiction").label == "contradiction"
    edits = [drop_modifier(p) for p, _ in CASES["drop-modifier"][2:5]]
    assert [e.edit for e in edits if isinstance(e, Transformed)] == [
        "adjective young",
        "subject PP with a toy gun",
        "final PP in a field",
    ]


def test_subsequence() -> None:
    out = subsequence("The man near the dog is sleeping.")
    assert (_hyp(out), out.label) == ("The dog is sleeping.", "neutral")
    assert _hyp(subsequence("A woman beside two kids was laughing.")) == "Two kids were laughing."
    assert subsequence("A man is sleeping.") == Skipped("no_subject_pp")
    assert subsequence("A man of the people is sleeping.") == Skipped("no_subject_pp")


@pytest.mark.parametrize(
    ("premise", "reason"),
    [
        ("A man is not holding a dog.", "negation"),
        ("A man isn't holding a dog.", "negation"),
        ("No man is holding a dog.", "negation"),
        ("Is a man holding a dog?", "question"),
        ("A man and a woman are holding a dog.", "coordination"),
        ("He is holding a dog.", "pronoun_subject"),
        ("A man is hugging a woman.", "symmetric_verb"),
        ("A man sitting on a stool.", "no_subject_np"),  # an -ing word is no head noun
        ("A man on a bench is holding a dog.", "no_verb"),
        ("A man is sleeping.", "no_object_np"),
        ("A man is picking up a box.", "no_object_np"),
        ("A girl is painting a room red.", "no_object_np"),
        ("Two dogs chase a ball.", "no_verb"),
        ("People are walking.", "no_subject_np"),
    ],
)
def test_inversion_refuses(premise: str, reason: str) -> None:
    assert invert(premise) == Skipped(reason)


def test_passive_and_drop_refuse() -> None:
    assert passivise("A man is having a drink.") == Skipped("no_passive")
    assert passivise("A dog has a ball.") == Skipped("no_passive")
    assert passivise("A man is not holding a dog.") == Skipped("negation")
    # downward-entailing contexts: dropping a modifier there is not entailed
    assert drop_modifier("A man without a red hat is walking.") == Skipped("negation")
    assert drop_modifier("Every young boy is running.") == Skipped("negation")
    assert drop_modifier("A man is not wearing a red hat.") == Skipped("negation")
    assert drop_modifier("A black and white dog runs.") == Skipped("coordination")
    # non-subsective: a toy gun is no gun; the adjective is never dropped
    assert drop_modifier("A boy holds a toy gun.") == Skipped("no_modifier")
    assert drop_modifier("A boy holds a fake red gun.") == Skipped("no_modifier")


def _pairs() -> list[Record]:
    premises = [
        "A man is holding a dog.",  # inversion, passive
        "A man is holding a dog.",  # the same premise again: visited once
        "A young boy is sleeping.",  # drop-modifier
        "A man is not holding a dog.",  # negation everywhere
        "The man near the dog is sleeping.",  # subsequence
        "Is a man holding a dog?",  # question everywhere
    ]
    return [Record(f"p{i}", "neutral", p, f"h{i}") for i, p in enumerate(premises)]


def test_summary_counts_every_premise() -> None:
    result = transform_records(_pairs(), seed=0)
    s = result.summary
    assert (s["n_sources"], s["n_distinct_premises"], s["n_written"]) == (6, 5, 4)
    assert s["labels"] == {"entailment": 2, "neutral": 2}
    assert s["rules"]["inversion"] == {
        "tried": 5,
        "applied": 1,
        "skipped": {"negation": 1, "no_object_np": 1, "no_verb": 1, "question": 1},
        "not_tried": 0,
        "label": "neutral",
        "written": 1,
    }
    assert s["rules"]["drop-modifier"]["skipped"] == {
        "no_modifier": 2,
        "negation": 1,
        "question": 1,
    }
    for rule in s["rules"].values():
        assert rule["applied"] + sum(rule["skipped"].values()) == rule["tried"]
    ids = [r.id for r in result.records]
    assert ids == ["tf-inversion:p0", "tf-passive:p0", "tf-drop-modifier:p2", "tf-subsequence:p4"]
    rec = result.records[0]
    assert rec.meta == {
        "type": "transform",
        "rule": "inversion",
        "heuristic": "lexical_overlap",
        "source_id": "p0",
        "edit": "swap A man / a dog",
    }
    assert (rec.premise, rec.hypothesis) == ("A man is holding a dog.", "A dog is holding a man.")


def test_per_rule_cap_and_balance() -> None:
    many = [Record(f"s{i}", "neutral", f"A man is holding a dog{'x' * i}.", "h") for i in range(7)]
    capped = transform_records(many, rules=["inversion", "passive"], per_rule=3, seed=1)
    assert capped.summary["rules"]["inversion"]["tried"] == 3
    assert capped.summary["rules"]["inversion"]["not_tried"] == 4
    assert len(capped.records) == 6
    unbalanced = [
        *many,
        *[Record(f"y{i}", "neutral", "A young boy is sleeping.", "h") for i in range(1)],
    ]
    both = transform_records(
        unbalanced, rules=["inversion", "passive", "drop-modifier"], balance=True
    )
    labels = [r.label for r in both.records]
    assert labels.count("entailment") == labels.count("neutral") == 7
    rules = both.summary["rules"]
    assert (rules["passive"]["written"], rules["drop-modifier"]["written"]) == (6, 1)
    assert rules["passive"]["balanced_out"] == 1


def test_transform_needs_pairs_and_known_rules() -> None:
    with pytest.raises(ConfigError, match="premise/hypothesis pairs"):
        transform_records([Record("t", "positive", None, None, "A text.")])
    with pytest.raises(ConfigError, match="unknown rule 'swap'; valid rules: inversion"):
        transform_records(_pairs(), rules=["swap"])


def test_cli_writes_exact_rows_and_is_deterministic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d0.jsonl"
    many = [Record(f"s{i}", "neutral", f"A man is holding a dog{'x' * i}.", "h") for i in range(10)]
    write_records([*_pairs(), *many], data)
    args = ["-q", "transform", str(data), "--rules", "inversion,passive", "--per-rule", "4"]
    for name in ("a", "b"):
        main([*args, "--out", str(tmp_path / name), "--seed", "3"])
    assert "inversion: 4 written, applied to 4 of" in capsys.readouterr().out
    main([*args, "--out", str(tmp_path / "c"), "--seed", "4", "--json"])
    out = tmp_path / "a" / "transforms.jsonl"
    rows = read_records(out, task="nli")
    assert len(rows) == 8
    assert [r.meta["rule"] for r in rows] == ["inversion"] * 4 + ["passive"] * 4
    assert out.read_bytes() == (tmp_path / "b" / "transforms.jsonl").read_bytes()
    assert out.read_bytes() != (tmp_path / "c" / "transforms.jsonl").read_bytes()
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_written"] == 8 and summary["rules"]["passive"]["applied"] == 4
    with pytest.raises(SystemExit) as err:
        main([*args, "--out", str(tmp_path / "a")])
    assert err.value.code == 2  # a published folder is not replaced without --overwrite
    with pytest.raises(SystemExit) as err:
        main(["-q", "transform", str(data), "--rules", "swap", "--out", str(tmp_path / "d")])
    assert err.value.code == 2
    assert "unknown rule 'swap'" in capsys.readouterr().err


def test_transform_stage_is_a_generated_source_for_combine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    animals = ["dog", "cat", "horse", "goat", "bird", "fish", "cow", "duck"]
    people = ["man", "woman", "boy", "girl", "child", "chef"]
    d0 = [
        Record(
            f"r{i}",
            ("entailment", "neutral", "contradiction")[i % 3],
            f"A {people[i % 6]} is holding a {animals[i % 8]}{'s' * (i // 8)}.",
            f"Someone holds an animal {i % 5}.",
        )
        for i in range(48)
    ]
    write_records(d0, tmp_path / "d0.jsonl")
    recipe = recipe_from_dict(
        {
            "name": "t",
            "data": {"d0": "d0.jsonl"},
            "stages": {
                "rules": {"stage": "transform", "input": "d0", "rules": ["inversion", "passive"]},
                "aug": {
                    "stage": "combine",
                    "recipe": "z-aug",
                    "original": "d0",
                    "generated": "rules",
                    "features": ["unigrams"],
                    "zfilter_batch_size": 20,
                },
            },
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run")
    stages = {s["name"]: s for s in manifest["stages"]}
    assert stages["rules"]["rows_out"] == {"total": 96, "inversion": 48, "passive": 48}
    combined = read_records(tmp_path / "run" / "aug" / "data.jsonl", task="nli")
    added = [r for r in combined if r.meta["type"] == "generated"]
    assert len(combined) - len(added) == 48 and added
    assert {r.meta["rule"] for r in added} <= {"inversion", "passive"}
    assert all(r.meta["source_id"].startswith("r") for r in added)


def test_pairs_that_fill_a_shortcut_breaking_cell_carry_it() -> None:
    from zdebias.stats.cells import Cell

    rows = [Record("p0", "neutral", "A man is holding a dog.", "h")]
    cells = [  # in order: a cell no pair fills, then two that the inversion fills
        Cell("nobody@hypothesis", "contradiction", "neutral", 9.0, 30, 2, 5),
        Cell("full-lex-overlap", "entailment", "neutral", 8.0, 40, 3, 7),
        Cell("dog@hypothesis", "entailment", "neutral", 4.0, 20, 5, 2),
        Cell("full-lex-overlap", "entailment", "contradiction", 8.0, 40, 3, 7),
    ]
    result = transform_records(rows, rules=["inversion", "passive"], cells=cells)
    inverted, passive = result.records
    assert inverted.hypothesis == "A dog is holding a man."
    assert inverted.meta["cell"] == "full-lex-overlap→neutral"
    assert inverted.meta["feature"] == "full-lex-overlap"
    assert passive.label == "entailment" and "cell" not in passive.meta  # no entailment cell
    assert passive.meta["heuristic"] == "lexical_overlap"
    assert result.summary["cells"] == {"full-lex-overlap→neutral": 1}
    plain = transform_records(rows, rules=["inversion", "passive"])
    assert "cells" not in plain.summary and "cell" not in plain.records[0].meta


def test_cli_tags_the_cells_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zdebias.stats.cells import Cell

    data = tmp_path / "d0.jsonl"
    write_records([Record("p0", "neutral", "A man is holding a dog.", "h")], data)
    cells = tmp_path / "cells.json"
    cell = Cell("full-lex-overlap", "entailment", "neutral", 8.0, 40, 3, 7)
    cells.write_text(json.dumps({"cells": [cell.to_dict()]}), encoding="utf-8")
    args = ["-q", "transform", str(data), "--rules", "inversion,passive"]
    main([*args, "--cells", str(cells), "--out", str(tmp_path / "t"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["cells"] == {"full-lex-overlap→neutral": 1}
    rows = read_records(tmp_path / "t" / "transforms.jsonl", task="nli")
    assert [r.meta.get("cell") for r in rows] == ["full-lex-overlap→neutral", None]
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit) as err:
        main([*args, "--cells", str(tmp_path / "bad.json"), "--out", str(tmp_path / "u")])
    assert err.value.code == 2 and not (tmp_path / "u").exists()
    assert "bad.json" in capsys.readouterr().err
