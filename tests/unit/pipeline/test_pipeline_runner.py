"""Runner mechanics with small fake stages: skip, redo on change, force, resume, manifest."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_json, write_records
from zdebias.errors import ConfigError, ZdebiasError
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.run_folder import MARKER, claim_run_dir, foreign_files
from zdebias.pipeline.runner import Runner, plan_recipe, run_recipe

CALLS: list[str] = []
#: shard index at which the "t-shards" stage raises KeyboardInterrupt (None: never)
INTERRUPT_AT: dict[str, int | None] = {"shard": None}


class SourceConfig(StageConfig):
    n: int = Field(6, ge=1)
    text: str = "x"


@register_stage("t-source", config=SourceConfig, outputs={"data": "records"})
def _source(cfg: SourceConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    CALLS.append(ctx.name)
    labels = ("entailment", "neutral", "contradiction")
    records = [
        Record(f"s{i}", labels[i % 3], f"{cfg.text} premise {i}", f"hyp {i}") for i in range(cfg.n)
    ]
    write_records(records, ctx.out_dir / "data.jsonl")
    return StageResult({"data": "data.jsonl"}, rows_out={"records": len(records)})


class UpperConfig(StageConfig):
    input: Annotated[str, Ref("records")]
    keep: int | None = None


@register_stage("t-upper", config=UpperConfig, outputs={"data": "records", "summary": "json"})
def _upper(cfg: UpperConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    CALLS.append(ctx.name)
    records = inputs.records("input")[: cfg.keep]
    out = [r.replace(hypothesis=(r.hypothesis or "").upper()) for r in records]
    write_records(out, ctx.out_dir / "data.jsonl")
    write_json({"n": len(out), "seed": ctx.seed}, ctx.out_dir / "summary.json")
    return StageResult(
        {"data": "data.jsonl", "summary": "summary.json"},
        rows_out={"records": len(out)},
        metrics={"n": len(out)},
    )


class ShardsConfig(StageConfig):
    input: Annotated[str, Ref("records")]
    shards: int = 3


@register_stage("t-shards", config=ShardsConfig, outputs={"data": "records"})
def _shards(cfg: ShardsConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Writes one shard per step, resuming from the shards already there."""
    CALLS.append(f"{ctx.name}:{'resumed' if ctx.resumed else 'fresh'}")
    records = inputs.records("input")
    for i in range(cfg.shards):
        shard = ctx.out_dir / f"shard-{i}.jsonl"
        if shard.exists():
            continue
        if INTERRUPT_AT["shard"] == i:
            INTERRUPT_AT["shard"] = None
            raise KeyboardInterrupt
        CALLS.append(f"{ctx.name}:shard-{i}")
        write_records([r.replace(id=f"{r.id}-{i}") for r in records], shard)
    merged = [
        r
        for i in range(cfg.shards)
        for r in read_records(ctx.out_dir / f"shard-{i}.jsonl", task="nli")
    ]
    write_records(merged, ctx.out_dir / "data.jsonl")
    return StageResult({"data": "data.jsonl"}, rows_out={"records": len(merged)})


class BadConfig(StageConfig):
    mode: str = "undeclared"


@register_stage("t-bad", config=BadConfig, outputs={"data": "records"})
def _bad(cfg: BadConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    CALLS.append(ctx.name)
    if cfg.mode == "raise":
        raise ZdebiasError("the stage broke")
    if cfg.mode == "undeclared":
        return StageResult({"data": "data.jsonl", "other": "x.json"})
    if cfg.mode == "missing":
        return StageResult({"data": "data.jsonl"})
    write_records([], ctx.out_dir / "data.jsonl")
    return StageResult({"data": "data.jsonl"})


def _recipe(**changes: Any) -> Any:
    data: dict[str, Any] = {
        "name": "fake",
        "seed": 4,
        "data": {"ext": "ext.jsonl"},
        "stages": {
            "src": {"stage": "t-source", "n": 6},
            "up": {"stage": "t-upper", "input": "src"},
            "shards": {"stage": "t-shards", "input": "up"},
            "ext_up": {"stage": "t-upper", "input": "ext", "keep": 2},
        },
    }
    for key, value in changes.items():
        stage, _, setting = key.partition("__")
        data["stages"][stage][setting] = value
    return recipe_from_dict(data)


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_records(
        [
            Record("e1", "neutral", "p", "h"),
            Record("e2", "entailment", "p2", "h2"),
            Record("e3", "neutral", "p3", "h3"),
        ],
        tmp_path / "ext.jsonl",
    )
    CALLS.clear()
    INTERRUPT_AT["shard"] = None
    return tmp_path / "run"


def _statuses(manifest: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in manifest["stages"]}


def test_first_run_then_everything_is_skipped(run_dir: Path) -> None:
    manifest = run_recipe(_recipe(), run_dir)
    assert CALLS == [
        "src",
        "up",
        "shards:fresh",
        "shards:shard-0",
        "shards:shard-1",
        "shards:shard-2",
        "ext_up",
    ]
    assert _statuses(manifest) == dict.fromkeys(["src", "up", "shards", "ext_up"], "done")
    assert manifest["status"] == "complete"
    stages = {s["name"]: s for s in manifest["stages"]}
    assert stages["up"]["rows_in"] == {"input": 6}
    assert stages["up"]["rows_out"] == {"records": 6}
    assert stages["shards"]["rows_out"] == {"records": 18}
    assert stages["ext_up"]["rows_in"] == {"input": 3}
    assert stages["ext_up"]["rows_out"] == {"records": 2}
    assert stages["up"]["metrics"] == {"n": 6}
    assert all(isinstance(s["seconds"], float) for s in manifest["stages"])
    assert manifest["seed"] == 4 and stages["src"]["seed"] == 4
    assert {"python", "torch", "transformers", "zdebias"} <= set(manifest["versions"])
    assert manifest["config"]["stages"]["up"] == {
        "stage": "t-upper",
        "seed": None,
        "input": "src",
        "keep": None,
    }
    assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")) == [
        "config.yaml",
        "ext_up",
        "manifest.json",
        "shards",
        "src",
        "up",
    ]
    assert len(read_records(run_dir / "shards" / "data.jsonl", task="nli")) == 18
    assert json.loads((run_dir / "up" / "summary.json").read_text()) == {"n": 6, "seed": 4}

    CALLS.clear()
    again = run_recipe(_recipe(), run_dir)
    assert CALLS == []
    assert _statuses(again) == dict.fromkeys(["src", "up", "shards", "ext_up"], "skipped")
    assert {s["name"]: s["rows_out"] for s in again["stages"]} == {
        s["name"]: s["rows_out"] for s in manifest["stages"]
    }
    assert len(again["invocations"]) == 2
    assert [row["action"] for row in plan_recipe(_recipe(), run_dir)] == ["skip (up to date)"] * 4


def test_a_changed_setting_redoes_that_stage_and_what_reads_it(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    plan = plan_recipe(_recipe(up__keep=4), run_dir)
    assert [row["action"] for row in plan] == [
        "skip (up to date)",
        "run (settings or inputs changed)",
        "run (after up)",
        "skip (up to date)",
    ]
    manifest = run_recipe(_recipe(up__keep=4), run_dir)
    assert CALLS == ["up", "shards:fresh", "shards:shard-0", "shards:shard-1", "shards:shard-2"]
    assert _statuses(manifest) == {
        "src": "skipped",
        "up": "done",
        "shards": "done",
        "ext_up": "skipped",
    }
    assert len(read_records(run_dir / "shards" / "data.jsonl", task="nli")) == 12


def test_the_recipe_seed_is_part_of_every_hash(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    recipe = _recipe()
    recipe.seed = 5
    run_recipe(recipe, run_dir)
    assert CALLS[:2] == ["src", "up"]
    assert json.loads((run_dir / "up" / "summary.json").read_text())["seed"] == 5


def test_a_changed_input_file_redoes_the_stages_that_read_it(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    write_records([Record("e9", "contradiction", "p", "new")], run_dir.parent / "ext.jsonl")
    manifest = run_recipe(_recipe(), run_dir)
    assert CALLS == ["ext_up"]
    assert {s["name"]: s["rows_out"] for s in manifest["stages"]}["ext_up"] == {"records": 1}


def test_a_tampered_output_is_redone(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    path = run_dir / "up" / "summary.json"
    path.write_text('{"n": 0}\n')
    run_recipe(_recipe(), run_dir)
    assert CALLS == ["up"]  # same content as before → what reads it stays done
    assert json.loads(path.read_text()) == {"n": 6, "seed": 4}


def test_force_and_redo(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    run_recipe(_recipe(), run_dir, force=["up"])
    assert CALLS == ["up"]  # identical output and hash: downstream stays done
    CALLS.clear()
    manifest = run_recipe(_recipe(), run_dir, force=True)
    assert CALLS == [
        "src",
        "up",
        "shards:fresh",
        "shards:shard-0",
        "shards:shard-1",
        "shards:shard-2",
        "ext_up",
    ]
    assert {s["name"]: s["reason"] for s in manifest["stages"]} == dict.fromkeys(
        ["src", "up", "shards", "ext_up"], "forced"
    )
    with pytest.raises(ConfigError, match="cannot redo unknown stage"):
        run_recipe(_recipe(), run_dir, force=["nope"])


def test_an_interrupted_run_resumes_and_matches_an_uninterrupted_one(
    run_dir: Path, tmp_path: Path
) -> None:
    INTERRUPT_AT["shard"] = 2
    with pytest.raises(KeyboardInterrupt):
        run_recipe(_recipe(), run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert _statuses(manifest) == {
        "src": "done",
        "up": "done",
        "shards": "interrupted",
        "ext_up": "pending",
    }
    assert sorted(p.name for p in (run_dir / "shards.partial").glob("shard-*")) == [
        "shard-0.jsonl",
        "shard-1.jsonl",
    ]
    assert not (run_dir / "shards").exists()
    assert [row["action"] for row in plan_recipe(_recipe(), run_dir)] == [
        "skip (up to date)",
        "skip (up to date)",
        "resume (interrupted)",
        "run (never run)",
    ]

    CALLS.clear()
    resumed = run_recipe(_recipe(), run_dir)
    assert CALLS == ["shards:resumed", "shards:shard-2", "ext_up"]
    stages = {s["name"]: s for s in resumed["stages"]}
    assert stages["shards"]["resumed"] is True and stages["shards"]["reason"] == "resumed"
    assert _statuses(resumed) == {
        "src": "skipped",
        "up": "skipped",
        "shards": "done",
        "ext_up": "done",
    }
    assert not (run_dir / "shards.partial").exists()

    other = tmp_path / "other"
    run_recipe(_recipe(), other)
    for stage in ("src", "up", "shards", "ext_up"):
        for path in sorted((run_dir / stage).iterdir()):
            if path.name != MARKER:
                assert path.read_bytes() == (other / stage / path.name).read_bytes(), path


def test_a_changed_setting_discards_an_interrupted_attempt(run_dir: Path) -> None:
    INTERRUPT_AT["shard"] = 1
    with pytest.raises(KeyboardInterrupt):
        run_recipe(_recipe(), run_dir)
    CALLS.clear()
    run_recipe(_recipe(shards__shards=2), run_dir)
    assert CALLS == ["shards:fresh", "shards:shard-0", "shards:shard-1", "ext_up"]


def test_a_cut_between_marker_and_rename_is_finished_on_rerun(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    os.replace(run_dir / "shards", run_dir / "shards.partial")  # as if cut before the rename
    CALLS.clear()
    manifest = run_recipe(_recipe(), run_dir)
    assert CALLS == []
    assert _statuses(manifest)["shards"] == "skipped"
    assert (run_dir / "shards" / "data.jsonl").exists()
    assert not (run_dir / "shards.partial").exists()


def test_failures_are_recorded_and_outputs_checked(run_dir: Path) -> None:
    def bad(mode: str) -> Any:
        return recipe_from_dict(
            {
                "name": "b",
                "stages": {"src": {"stage": "t-source"}, "bad": {"stage": "t-bad", "mode": mode}},
            }
        )

    with pytest.raises(ZdebiasError, match="the stage broke"):
        run_recipe(bad("raise"), run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    entry = manifest["stages"][1]
    assert (entry["status"], entry["error"]) == ("failed", "the stage broke")
    with pytest.raises(
        ZdebiasError,
        match=r"returned outputs \['data', 'other'\], declared "
        r"\['data'\]",
    ):
        run_recipe(bad("undeclared"), run_dir)
    with pytest.raises(ZdebiasError, match=r"output 'data' \(data.jsonl\) was not written"):
        run_recipe(bad("missing"), run_dir)
    CALLS.clear()
    manifest = run_recipe(bad("ok"), run_dir)
    assert CALLS == ["bad"] and _statuses(manifest) == {"src": "skipped", "bad": "done"}


def test_missing_data_fails_before_anything_runs(run_dir: Path) -> None:
    (run_dir.parent / "ext.jsonl").unlink()
    with pytest.raises(
        ConfigError,
        match=r"missing data: ext \(ext.jsonl\); fix the paths in "
        r"the recipe or override them, e.g. data.ext=PATH",
    ):
        run_recipe(_recipe(), run_dir)
    assert CALLS == []


def test_one_run_per_folder_at_a_time(run_dir: Path) -> None:
    claim_run_dir(run_dir, _recipe().name)  # as the other run did before it took the lock
    with (run_dir / ".zdebias-lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="another zdebias run is using this folder"):
            Runner(_recipe(), run_dir).run()
    assert CALLS == []


def test_a_run_uses_only_its_own_recipe_s_folder(run_dir: Path) -> None:
    """Issue 27: the folder's ownership marker names the recipe; any other non-empty folder
    (a user's, another recipe's run, another zdebias output) is refused, nothing written."""
    from zdebias.data.ownership import owner_of
    from zdebias.data.writers import mark_owned

    run_recipe(_recipe(), run_dir)
    assert owner_of(run_dir) == {
        "zdebias": owner_of(run_dir)["zdebias"],
        "kind": "run",
        "recipe": "fake",
    }
    CALLS.clear()
    assert _statuses(run_recipe(_recipe(), run_dir)) == dict.fromkeys(
        ["src", "up", "shards", "ext_up"], "skipped"
    )
    other = run_dir.parent / "other"
    run_recipe(recipe_from_dict({**_recipe().to_dict(), "name": "other"}), other)
    CALLS.clear()
    user = run_dir.parent / "user"
    user.mkdir()
    (user / "manifest.json").write_text('{"name": "fake", "stages": []}')
    (user / "notes.txt").write_text("mine")
    output = run_dir.parent / "output"
    output.mkdir()
    mark_owned(output, "output", files=[])
    refusals = {
        other: f"{other} holds a run of recipe 'other', not 'fake'; choose a new --out",
        user: f"{user} holds files zdebias did not write; choose a new --out or empty it",
        output: f"{output} holds a zdebias output folder, not a run; choose a new --out",
    }
    for folder, message in refusals.items():
        before = sorted(p.name for p in folder.iterdir())
        with pytest.raises(ConfigError) as info:
            run_recipe(_recipe(), folder)
        assert str(info.value).startswith(message)
        assert sorted(p.name for p in folder.iterdir()) == before
    assert CALLS == []


def test_a_recipe_that_extends_another_runs_in_its_folder_and_reuses_its_stages(
    run_dir: Path,
) -> None:
    """`extends: [fake]`: the recipe adds a stage to fake's run; the shared stages (same
    settings) are skipped, the folder stays fake's; without `extends` it is refused."""
    from zdebias.data.ownership import owner_of

    run_recipe(_recipe(), run_dir)
    CALLS.clear()
    plus = _recipe().to_dict()
    plus["name"] = "fake-plus"
    plus["stages"]["up2"] = {"stage": "t-upper", "input": "up", "keep": 1}
    with pytest.raises(ConfigError, match=r"holds a run of recipe 'fake', not 'fake-plus'; "):
        run_recipe(recipe_from_dict(plus), run_dir)
    assert CALLS == []
    manifest = run_recipe(recipe_from_dict({**plus, "extends": ["fake"]}), run_dir)
    assert _statuses(manifest) == {
        **dict.fromkeys(["src", "up", "shards", "ext_up"], "skipped"),
        "up2": "done",
    }
    assert len(CALLS) == 1 and owner_of(run_dir)["recipe"] == "fake"
    CALLS.clear()
    assert _statuses(run_recipe(_recipe(), run_dir)) == dict.fromkeys(
        ["src", "up", "shards", "ext_up"], "skipped"
    )  # the base recipe still runs there, and finds its stages done
    assert CALLS == []


def test_a_run_folder_without_the_marker_is_refused_and_says_how_to_continue_it(
    run_dir: Path,
) -> None:
    """Issue 40: a folder without zdebias's marker is never adopted, even when its manifest
    names the recipe and it holds only a stage's folder (it was: `zf/thesis.tex` was deleted
    when the stage ran). The refusal says how to mark a run of zdebias 0.2 to continue it."""
    from zdebias.data.ownership import MARKER as OWNER
    from zdebias.data.ownership import owner_of

    user = run_dir.parent / "user"
    (user / "src").mkdir(parents=True)
    (user / "manifest.json").write_text('{"name": "fake", "stages": [{"name": "src"}]}')
    (user / "src" / "thesis.tex").write_text("mine")
    with pytest.raises(ConfigError) as info:
        run_recipe(_recipe(), user)
    assert str(info.value) == (
        f"{user} holds files zdebias did not write; choose a new --out or empty it (if zdebias "
        "0.2 wrote this run of 'fake' and it holds only the run's files, continue it by "
        f'writing {{"kind": "run", "recipe": "fake"}} into {user / OWNER})'
    )
    assert (user / "src" / "thesis.tex").read_text() == "mine"
    assert sorted(p.name for p in user.iterdir()) == ["manifest.json", "src"]
    assert CALLS == []

    run_recipe(_recipe(), run_dir)
    (run_dir / OWNER).unlink()  # as 0.2 left it
    CALLS.clear()
    with pytest.raises(ConfigError, match="continue it by writing"):
        run_recipe(_recipe(), run_dir)
    (run_dir / OWNER).write_text('{"kind": "run", "recipe": "fake"}')  # as the refusal says
    assert run_recipe(_recipe(), run_dir)["status"] == "complete"
    assert CALLS == [] and owner_of(run_dir)["recipe"] == "fake"


def test_dry_run_exits_2_on_a_plan_with_errors(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from helpers.cli_main import run_main

    path = run_dir.parent / "r.yaml"
    path.write_text(yaml.safe_dump(_recipe().to_dict(), sort_keys=False))
    assert run_main(["run", path, "--dry-run", "--out", run_dir]) == 0
    assert "#   src" in capsys.readouterr().out
    code = run_main(["run", path, "--dry-run", "--out", run_dir, "data.ext.path=gone.jsonl"])
    out, err = capsys.readouterr()
    assert code == 2 and "error: data 'ext': gone.jsonl: no such file" in out
    assert err == "error: stages.ext_up: data 'ext': gone.jsonl: no such file or folder\n"
    user = run_dir.parent / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    assert run_main(["run", path, "--dry-run", "--out", user]) == 2
    assert capsys.readouterr().err.startswith(f"error: {user} holds files zdebias did not write")
    assert not run_dir.exists() and [p.name for p in user.iterdir()] == ["notes.txt"]


def test_the_manifest_records_the_running_zdebias_even_when_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkout run with PYTHONPATH=src (no installed zdebias) still records its version."""
    import importlib.metadata as metadata

    import zdebias
    from zdebias.pipeline.manifest import versions

    real = metadata.version

    def version(name: str) -> str:
        if name == "zdebias":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    got = versions()
    assert got["zdebias"] == zdebias.__version__
    assert got["torch"] == real("torch")


# issue 52.5: a changed recipe redoing a stage deleted a user's file in the stage's folder
# (RUN/up/my_analysis.txt); now the run stops before the stage, naming the file, as
# `filter --out` does for a folder holding files zdebias did not write


def _stage_status(manifest: dict, name: str) -> str:
    return next(s["status"] for s in manifest["stages"] if s["name"] == name)


def test_the_done_marker_lists_every_file_the_stage_wrote(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    up = json.loads((run_dir / "up" / MARKER).read_text())
    assert up["written"] == ["data.jsonl", "summary.json"]
    shards = json.loads((run_dir / "shards" / MARKER).read_text())
    assert shards["written"] == [
        "data.jsonl",
        "shard-0.jsonl",
        "shard-1.jsonl",
        "shard-2.jsonl",
    ]
    assert foreign_files(run_dir / "up") == []


def test_a_users_file_in_a_redone_stage_is_kept_and_named(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    mine = run_dir / "up" / "my_analysis.txt"
    mine.write_text("my notes\n")
    (run_dir / "up" / "plots").mkdir()
    (run_dir / "up" / "plots" / "a.png").write_bytes(b"png")
    CALLS.clear()
    # a file in a stage that stays up to date is no one's business
    assert _stage_status(run_recipe(_recipe(), run_dir), "up") == "skipped"
    with pytest.raises(ConfigError) as info:
        run_recipe(_recipe(up__keep=4), run_dir)  # changed: "up" is redone
    message = str(info.value)
    assert message.startswith(f"{run_dir / 'up' / 'my_analysis.txt'}: stage 'up' is redone")
    assert "2 files zdebias did not write (my_analysis.txt, plots/a.png)" in message
    assert mine.read_text() == "my notes\n"
    assert "up" not in CALLS  # refused before the stage ran
    problems = Runner(_recipe(up__keep=4), run_dir).problems(
        Runner(_recipe(up__keep=4), run_dir).plan()
    )
    assert any("my_analysis.txt" in p for p in problems)  # --dry-run says so too
    mine.unlink()
    (run_dir / "up" / "plots" / "a.png").unlink()
    manifest = run_recipe(_recipe(up__keep=4), run_dir)
    assert _stage_status(manifest, "up") == "done"


def test_forced_redo_keeps_a_users_file_too(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    mine = run_dir / "src" / "notes.md"
    mine.write_text("x")
    with pytest.raises(ConfigError, match=r"notes\.md"):
        run_recipe(_recipe(), run_dir, force=["src"])
    assert mine.read_text() == "x"


def test_a_marker_of_an_older_zdebias_tells_files_by_their_age(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    marker_path = run_dir / "up" / MARKER
    marker = json.loads(marker_path.read_text())
    del marker["written"]
    stamp = marker_path.stat().st_mtime_ns
    marker_path.write_text(json.dumps(marker))
    os.utime(marker_path, ns=(stamp, stamp))
    extra = run_dir / "up" / "examples.json"  # written by the stage, undeclared, older
    extra.write_text("{}")
    os.utime(extra, ns=(stamp - 10**9, stamp - 10**9))
    later = run_dir / "up" / "later.txt"
    later.write_text("mine")
    os.utime(later, ns=(stamp + 10**9, stamp + 10**9))
    assert foreign_files(run_dir / "up") == ["later.txt"]


def test_a_foreign_partial_folder_is_not_removed(run_dir: Path) -> None:
    run_recipe(_recipe(), run_dir)
    partial = run_dir / "up.partial"
    partial.mkdir()
    (partial / "theirs.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"up\.partial is not a work folder of this run"):
        run_recipe(_recipe(up__keep=4), run_dir)
    assert (partial / "theirs.txt").read_text() == "x"


def test_a_folder_at_the_run_lock_is_one_line(run_dir: Path) -> None:
    """``RUN/.zdebias-lock`` a folder ended the run in a traceback (IsADirectoryError)."""
    claim_run_dir(run_dir, _recipe().name)
    (run_dir / ".zdebias-lock").mkdir()
    with pytest.raises(ConfigError, match=r"\.zdebias-lock is a folder, where the run folder"):
        run_recipe(_recipe(), run_dir)
