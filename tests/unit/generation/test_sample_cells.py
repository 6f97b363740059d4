"""Sampling toward shortcut-breaking cells (``zdebias sample --premises P --cells C``): each
cell gets exactly its quota of rows with its label and its feature, the cells a sampler cannot
steer are listed as skipped with their count, and a stopped run resumes byte for byte."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_main import run_main
from helpers.nli_toy import TOY_PREMISES
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.tokenize import tokenize
from zdebias.generation.sample import sample_generator
from zdebias.generation.store import read_samples

NOBODY = "nobody@hypothesis"


def _cell(feature: str, label: str, needed: int, favoured: str = "contradiction") -> dict:
    return {"feature": feature, "favoured": favoured, "label": label, "z": 9.0, "n": 81,
            "rows": 0, "needed": needed}  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A premises file (the toy premises) and a cells file: nobody@hypothesis → entailment (3)
    and → neutral (2), and a hypothesis-only cell (4 rows) that cannot be steered."""
    premises = tmp_path / "premises.jsonl"
    with premises.open("w") as fh:
        for i, text in enumerate(TOY_PREMISES):
            fh.write(json.dumps({"id": f"p{i}", "premise": text, "hypothesis": "x",
                                 "label": "neutral"}) + "\n")  # fmt: skip
    cells = tmp_path / "cells.json"
    rows = [
        _cell(NOBODY, "entailment", 3),
        _cell(NOBODY, "neutral", 2),
        _cell("hypo-only-pred=contradiction", "entailment", 4),
    ]
    cells.write_text(json.dumps({"threshold": 3.0, "cells": rows}))
    return premises, cells


def _run(gen: Path, out: Path, files: tuple[Path, Path], **kw: Any) -> dict[str, Any]:
    options = {"batch_size": 2, "shard_size": 2, "attempts": 8, "progress": False, **kw}
    return sample_generator(gen, out, 20, premises=str(files[0]), cells=str(files[1]), **options)


def test_each_cell_gets_its_quota_with_its_feature(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    summary = _run(ending_generator, tmp_path / "s", files)
    records = read_samples(tmp_path / "s")
    assert summary["complete"] and len(records) == 5
    assert Counter(r.label for r in records) == {"entailment": 3, "neutral": 2}
    for r in records:
        assert "nobody" in tokenize(r.hypothesis.lower())  # the feature fires
        assert r.hypothesis.startswith("Nobody")  # prefix decoding
        assert tokenize(r.hypothesis) != ["nobody"]  # more than the prefix
        assert r.meta["cell"] == f"{NOBODY}→{r.label}" and r.meta["feature"] == NOBODY
        assert r.premise in TOY_PREMISES and r.meta["premise_id"].startswith("p")
    cells = summary["cells"]
    assert [(c["cell"], c["asked"], c["fired"], c["short"], c["steer"]) for c in cells["rows"]] == [
        (f"{NOBODY}→entailment", 3, 3, 0, "prefix"),
        (f"{NOBODY}→neutral", 2, 2, 0, "prefix"),
    ]
    for c in cells["rows"]:  # every decode counted: written, missed, malformed, duplicate
        dropped = c["missed"] + c["prefix_only"] + c["malformed"] + c["duplicates"]
        assert c["generated"] == c["fired"] + dropped
    assert cells["skipped"] == [
        {
            "cell": "hypo-only-pred=contradiction→entailment",
            "needed": 4,
            "reason": "a hypo-only feature cannot be steered",
        }
    ]
    assert (cells["n_skipped"], cells["skipped_rows"], cells["asked"]) == (1, 4, 5)
    assert summary["n_requested"] == 5  # the cells' rows, not --n 20


def test_stop_and_resume_is_byte_identical(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    whole = _run(ending_generator, tmp_path / "whole", files)
    part = _run(ending_generator, tmp_path / "part", files, max_shards=1)
    assert not part["complete"] and part["n_written"] == 2
    rest = _run(ending_generator, tmp_path / "part", files)
    assert rest["complete"]
    a, b = (tmp_path / "whole" / "samples.jsonl"), (tmp_path / "part" / "samples.jsonl")
    assert a.read_bytes() == b.read_bytes()
    assert rest["cells"] == whole["cells"] and rest["tally"] == whole["tally"]
    assert json.loads((tmp_path / "part" / "summary.json").read_text())["cells"] == whole["cells"]


def test_a_cell_short_of_its_feature_ends_the_run_with_what_it_has(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    """A checked feature the random model almost never writes (a hypothesis of 15+ tokens
    within 32): its rows are decoded `attempts` times each, missed, and counted short."""
    cells = tmp_path / "long.json"
    cells.write_text(json.dumps({"cells": [_cell("hypo-len>=15", "neutral", 2),
                                           _cell(NOBODY, "entailment", 1)]}))  # fmt: skip
    summary = _run(ending_generator, tmp_path / "s", (files[0], cells), attempts=2)
    rows = {c["cell"]: c for c in summary["cells"]["rows"]}
    long = rows["hypo-len>=15→neutral"]
    assert (long["steer"], long["asked"], long["fired"], long["short"]) == ("checked", 2, 0, 2)
    assert long["generated"] == 4 and long["missed"] >= 1  # 2 rows x 2 decodes, all dropped
    assert long["generated"] == long["missed"] + long["malformed"] + long["duplicates"]
    assert summary["complete"] and summary["n_written"] == rows[f"{NOBODY}→entailment"]["fired"]
    missed = sum(r["missed"] for r in rows.values())
    assert summary["malformed"]["feature_missing"] == missed
    dropped = [json.loads(x) for p in sorted((tmp_path / "s").glob("dropped-*.jsonl"))
               for x in p.open()]  # fmt: skip
    assert sum(d["reason"] == "feature_missing" for d in dropped) == missed


def test_requests_that_are_refused(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "s"
    with pytest.raises(ConfigError, match=r"--cells: only premise-conditioned"):
        sample_generator(ending_generator, out, 3, cells=str(files[1]), progress=False)
    with pytest.raises(ConfigError, match=r"--cells with --per-premise"):
        _run(ending_generator, out, files, per_premise="entailment=1")
    with pytest.raises(ConfigError, match=r"--cells-top: only targeted sampling"):
        sample_generator(ending_generator, out, 3, premises=str(files[0]), cells_top=2,
                         progress=False)  # fmt: skip
    with pytest.raises(ConfigError, match=r"--cells-max: only targeted sampling"):
        sample_generator(ending_generator, out, 3, premises=str(files[0]), cells_max=2,
                         progress=False)  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cells": [{"feature": NOBODY}]}))
    with pytest.raises(DataError, match=r"bad.json: field 'cells': cell 0: expected the keys"):
        _run(ending_generator, out, (files[0], bad))
    only = tmp_path / "only.json"
    only.write_text(json.dumps({"cells": [_cell("hypo-only-pred=neutral", "entailment", 3)]}))
    with pytest.raises(ConfigError, match=r"none of the 1 cells can be sampled \(a hypo-only"):
        _run(ending_generator, out, (files[0], only))


def test_cli_prints_the_cells_and_refuses_a_bad_file(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path, capsys: Any
) -> None:
    premises, cells = files
    args = ["sample", "--generator", ending_generator, "--premises", premises, "--n", 20]
    args += ["--batch-size", 2, "--attempts", 8, "--measure-with", premises, "-q"]
    assert run_main([*args, "--cells", cells, "--out", tmp_path / "s"]) == 0
    out = capsys.readouterr().out
    assert "2 cells: 5/5 rows with their feature, 0 short; 1 cells skipped (4 rows)" in out
    assert f"{NOBODY}→entailment | prefix | 3 |" in out and "z before → after" in out
    assert "skipped, a hypo-only feature cannot be steered: 1 cells" in out
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    row = summary["cells"]["rows"][0]  # D0 (the premises file) has no "nobody": z 0 → -1.41
    assert (row["n_before"], row["n_after"], row["z_before"]) == (0, 5, 0.0)
    # after: 5 rows with "nobody", none contradiction: z = (0 − 1/3) / sqrt((2/9) / 5)
    assert row["z_after"] == pytest.approx((0 - 1 / 3) / (2 / 9 / 5) ** 0.5, abs=1e-4)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert run_main([*args, "--cells", bad, "--out", tmp_path / "b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json: field 'cells': expected `zdebias stats --cells`" in err[0]
    assert not (tmp_path / "b").exists()


def test_recipe_stage_fills_the_cells(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    premises, cells = files
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\ntask: nli\ndata: {{train: {premises}}}\nstages:\n"
        f"  targeted: {{stage: sample, generator: {ending_generator}, premises: train,\n"
        f"             cells: {cells}, measure_with: train, n: 20, batch_size: 2,\n"
        "             attempts: 8}\n"
    )
    assert run_main(["run", recipe, "--out", tmp_path / "run", "-q"]) == 0
    folder = next((tmp_path / "run").rglob("samples.jsonl")).parent
    records = read_samples(folder)
    assert Counter(r.meta["cell"] for r in records) == {
        f"{NOBODY}→entailment": 3,
        f"{NOBODY}→neutral": 2,
    }
    summary = json.loads((folder / "summary.json").read_text())
    assert [r["z_after"] is not None for r in summary["cells"]["rows"]] == [True, True]


def test_plan_takes_cells_in_order_within_cells_top_and_n() -> None:
    """Slots are the cells' rows in order; ``--cells-top`` counts the features that can be
    sampled; a cell beyond ``--n`` or ``--cells-top`` is skipped with its reason."""
    from zdebias.generation.targeted import TargetPlan
    from zdebias.stats.cells import load_cells

    cells = load_cells(
        {
            "cells": [
                _cell("hypo-only-pred=neutral", "entailment", 9, favoured="neutral"),
                _cell(NOBODY, "entailment", 3),
                _cell("man@premise", "neutral", 2),  # two premises have "man"
                _cell("cat@premise", "neutral", 2),  # none has "cat"
                _cell(NOBODY, "neutral", 2),
                _cell("hypo-len<5", "neutral", 1, favoured="entailment"),
            ]
        }
    )
    premises = [
        Record(id=f"p{i}", premise=p, hypothesis="x", label="neutral")
        for i, p in enumerate(["A man sits.", "A dog runs.", "The man eats."])
    ]
    labels = ["entailment", "neutral", "contradiction"]
    plan = TargetPlan.of(cells, premises, seed=0, labels=labels, most=7, features=2)
    assert [(t.key, t.steer, t.prefix) for t in plan.targets] == [
        (f"{NOBODY}→entailment", "prefix", "Nobody"),
        ("man@premise→neutral", "premise", ""),
        (f"{NOBODY}→neutral", "prefix", "Nobody"),
    ]
    assert plan.starts == (0, 3, 5) and plan.total == 7
    assert [(s["cell"], s["reason"]) for s in plan.skipped] == [
        ("hypo-only-pred=neutral→entailment", "a hypo-only feature cannot be steered"),
        ("cat@premise→neutral", "no premise has it"),
        ("hypo-len<5→neutral", "beyond --cells-top 2"),
    ]
    slots = [plan.slot(g) for g in range(7)]
    assert [s.label for s in slots] == ["entailment"] * 3 + ["neutral"] * 4
    assert {s.premise.id for s in slots[3:5]} == {"p0", "p2"}  # premises with "man" only
    # --n 6: the second "nobody" cell does not fit in what is left; the next one does
    within = TargetPlan.of(cells, premises, seed=0, labels=labels, most=6)
    assert within.skipped[-1] == {
        "cell": f"{NOBODY}→neutral",
        "needed": 2,
        "reason": "beyond --n 6",
    }
    assert [t.key for t in within.targets][-1] == "hypo-len<5→neutral" and within.total == 6
    # --cells-max 2: each cell asks 2 rows at most, so every cell that can be steered fits
    capped = TargetPlan.of(cells, premises, seed=0, labels=labels, most=7, cap=2)
    assert [(t.key, t.cell.needed) for t in capped.targets] == [
        (f"{NOBODY}→entailment", 2),
        ("man@premise→neutral", 2),
        (f"{NOBODY}→neutral", 2),
        ("hypo-len<5→neutral", 1),
    ]
    assert capped.starts == (0, 2, 4, 6) and capped.total == 7
    assert capped.digest() != plan.digest()


def test_cells_max_unset_leaves_settings_and_stage_hashes_as_before() -> None:
    # an unset cells_max is left out of the settings' dump, so sample stages that do not set
    # it keep the hashes (and resumable runs) they had before the setting existed
    from zdebias.generation.settings import SampleSettings

    assert "cells_max" not in SampleSettings(n=5).model_dump()
    assert SampleSettings(n=5, cells_max=3).model_dump()["cells_max"] == 3


def test_overlap_cells_start_the_hypothesis_with_the_premise(
    ending_generator: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    """High-overlap cells are steered by copying the premise's first words (the generator
    alone almost never writes them); no-lex-overlap stays checked."""
    from zdebias.generation.targeted import copy_prefix, steering
    from zdebias.stats.cells import Cell

    labels = ("entailment", "neutral", "contradiction")
    no = Cell("no-lex-overlap", "neutral", "entailment", 5.0, 40, 1, 3)
    assert steering(no, labels) == ("checked", "")
    cells = tmp_path / "overlap.json"
    cells.write_text(json.dumps({"cells": [_cell("lex-overlap>0.7", "neutral", 3, "entailment")]}))
    summary = _run(ending_generator, tmp_path / "s", (files[0], cells))
    (row,) = summary["cells"]["rows"]
    records = read_samples(tmp_path / "s")
    assert (row["steer"], row["asked"], row["short"]) == ("copy", 3, 3 - row["fired"])
    assert row["fired"] == len(records) >= 2  # a random model: most decodes keep the overlap
    assert {r.label for r in records} == {"neutral"}
    for r in records:
        prefix = copy_prefix(r.premise)
        assert r.hypothesis.startswith(prefix) and tokenize(r.hypothesis) != tokenize(prefix)
        hyp, prem = tokenize(r.hypothesis.lower()), set(tokenize(r.premise.lower()))
        assert sum(w in prem for w in hyp) / len(hyp) > 0.7  # the cell's feature, by hand
        assert r.meta["cell"] == "lex-overlap>0.7→neutral"
