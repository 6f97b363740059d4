"""The results pages are rebuilt, not retyped: every table of docs/results.md and
docs/results/*.md equals its rebuild from the committed predictions (docs/results/data/), and
Z(D0) re-derives with `zdebias filter` from the published out-of-fold predictions."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.script_module import load_script
from zdebias.data.readers import read_records
from zdebias.evaluation.published import expand

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "results.md",
    *sorted((ROOT / "docs" / "results").glob("*.md")),
]
DATA = ROOT / "docs" / "results" / "data" / "snli20k-cpu"


@pytest.fixture(scope="module")
def pages() -> Any:
    return load_script("results_pages")


def test_every_table_of_the_pages_equals_its_rebuild(pages: Any, data_dir: Path) -> None:
    blocks = sum(p.read_text(encoding="utf-8").count("<!-- rebuilt: ") for p in PAGES)
    assert blocks >= 6
    assert pages.check(PAGES, write=False, data=data_dir) == 0


def test_the_published_files_hold_no_gold_label_or_machine_path(pages: Any) -> None:
    """The datasets' labels are read back from the data folder, checked by digest; no file
    names a folder of the machine it was made on."""
    for file in sorted(DATA.glob("*.json.gz")):
        text = gzip.decompress(file.read_bytes()).decode()
        doc = json.loads(text)
        assert "/work/" not in text and "/home/" not in text, file.name
        if file.name.endswith(".oof.json.gz"):
            assert "gold" not in doc
            continue
        for name, suite in doc["suites"].items():
            assert "gold" not in suite and suite["gold_digest"], (file.name, name)
            assert not Path(suite["source"]["path"].split("::")[0]).is_absolute()


def test_z_of_d0_rederives_from_the_published_out_of_fold_predictions(
    pages: Any, data_dir: Path, tmp_path: Path
) -> None:
    sets = load_script("training_sets")
    oof = pages.read_oof(DATA / "clf_hypo.oof.json.gz")
    d0 = read_records(data_dir / "snli_20k" / "train.jsonl")
    assert len(d0) == oof["n"] == 19993
    assert sets.content_digest(d0) == oof["rows"]  # the very rows, in the same order
    predicted = expand(oof["predicted"], oof["classes"])
    given = tmp_path / "d0.jsonl"
    with given.open("w", encoding="utf-8") as f:
        for r, label in zip(d0, predicted, strict=True):
            row = {"id": r.id, "premise": r.premise, "hypothesis": r.hypothesis, "label": r.label}
            f.write(json.dumps({**row, "meta": {"hypo_only_pred": label}}) + "\n")
    out = tmp_path / "zd0"
    cmd = [sys.executable, "-m", "zdebias", "filter", str(given), "--out", str(out)]
    subprocess.run([*cmd, "--biased-k", "20", "--seed", "1", "-q"], check=True)  # the recipe's
    kept = [json.loads(line)["id"] for line in (out / "kept.jsonl").open(encoding="utf-8")]
    published = gzip.decompress((DATA / "zfilter.ids.txt.gz").read_bytes()).decode().split()
    assert kept == published
    # the same rows, in the same order, as the Z(D0) published with the training sets
    earlier = ROOT / "docs" / "data" / "snli20k-cpu" / "zfilter.ids.txt.gz"
    assert kept == gzip.decompress(earlier.read_bytes()).decode().split()
    assert len(kept) == pages.published_rows(DATA, "zfilter")


def test_a_method_s_controls_follow_its_training_size(pages: Any, tmp_path: Path) -> None:
    """D0 is the same-size control of a method trained on about all of D0's rows; the random
    subset is added for one trained on fewer (by the published sizes, not by the name)."""
    sizes = {"d0": 19993, "poe": 19993, "aug": 20162, "seq": 7180, "rand": 7139}
    run = {
        "trainings": {k: [{"seed": 1, "n_train": n}] for k, n in sizes.items()},
        "classifiers": {
            "MiniLM w/ D0": "d0",
            "MiniLM PoE w/ Seq-Z": "seq",  # its name ends like no rule would guess
            "MiniLM w/ Z-Aug": "aug",
            "Mine": "poe",
            "MiniLM w/ random subset": "rand",
        },
    }
    (tmp_path / "run.json").write_text(json.dumps(run), encoding="utf-8")
    d0, both = pages.BASELINES[:1], pages.BASELINES
    assert pages._controls("Mine", tmp_path) == d0
    assert pages._controls("MiniLM w/ Z-Aug", tmp_path) == d0
    assert pages._controls("MiniLM PoE w/ Seq-Z", tmp_path) == both
    with pytest.raises(SystemExit, match="no training size for 'other'"):
        pages._controls("other", tmp_path)
