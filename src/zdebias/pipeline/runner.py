"""Run a recipe: stages in order, each skipped when done, redone when changed, resumed if cut.

A rerun skips a stage whose done-marker holds the same hash and whose outputs are untouched
(:mod:`zdebias.pipeline.digests`), redoes it otherwise, and then redoes whatever reads outputs
that changed. A stage runs inside ``STAGE.partial/`` (:mod:`zdebias.pipeline.run_folder`);
only when its function returns, its outputs are digested, the marker is written and the folder
is renamed to ``STAGE/``, so no finished-looking stage is ever half written. An interrupted
stage (Ctrl-C, or SIGTERM while a run runs) keeps its work folder: the next run hands it back to
the stage (``ctx.resumed``) when the hash is unchanged, so resumable stages (sampling, written
in shards) continue where they stopped. Every step is recorded in the manifest
(:mod:`zdebias.pipeline.manifest`).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from zdebias.data.labels import get_task
from zdebias.data.writers import atomic_open, claim, write_json
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.pipeline.catalogue import get_stage
from zdebias.pipeline.config import Recipe, StageConfig, dump_yaml, field_refs, iter_leaves
from zdebias.pipeline.digests import Digests, InputPending, file_stats, is_done, stage_hash
from zdebias.pipeline.manifest import Manifest, utc_now
from zdebias.pipeline.references import Target, resolve_reference
from zdebias.pipeline.registry import (
    DataInput,
    ExternalInput,
    Inputs,
    OutputInput,
    StageContext,
    StageResult,
    map_refs,
)
from zdebias.pipeline.run_folder import (
    ATTEMPT,
    CONFIG,
    DIGEST_CACHE,
    MARKER,
    check_run_dir,
    check_stage_folder,
    claim_run_dir,
    locked,
    promote,
    read_json,
    run_dir_for,
    stage_files,
)
from zdebias.pipeline.settings import RunSettings


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system), in seconds."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's stop) ends the run as Ctrl-C does: the stage is marked
    interrupted and keeps its work folder. Only the main thread can take the signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Runner:
    """Runs (or plans) one recipe in one run folder. See the module docstring."""

    def __init__(
        self,
        recipe: Recipe,
        run_dir: str | Path,
        *,
        force: bool | Collection[str] = False,
        progress: bool = True,
        console: Any = None,
        recipe_path: str | None = None,
        overrides: Collection[str] = (),
    ) -> None:
        self.recipe = recipe
        self.run_dir = Path(run_dir)
        unknown = set() if isinstance(force, bool) else set(force) - set(recipe.stages)
        if unknown:
            raise ConfigError(
                f"cannot redo unknown stage(s) {', '.join(sorted(unknown))}; stages are "
                f"{', '.join(recipe.stages)}"
            )
        self.force = force
        self.progress = progress
        self.console = console
        self.recipe_path = recipe_path
        self.overrides = list(overrides)
        self.task = get_task(recipe.task)
        self.digests = Digests(self.run_dir / DIGEST_CACHE)
        #: stage name → its marker's outputs (path relative to the run folder, digest, kind)
        self.outputs: dict[str, dict[str, dict[str, Any]]] = {}
        self.manifest = Manifest(self.run_dir)

    # ------------------------------------------------------------------ output

    def _say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False, soft_wrap=True)

    def _forced(self, name: str) -> bool:
        return self.force is True or (not isinstance(self.force, bool) and name in self.force)

    # ------------------------------------------------------------------ resolution

    def _resolve(self, name: str, cfg: StageConfig) -> dict[str, Any]:
        earlier = list(self.recipe.stages)[: list(self.recipe.stages).index(name)]
        out: dict[str, Any] = {}
        for fld, ref in field_refs(type(cfg)).items():

            def one(value: str, fld: str = fld, ref: Any = ref) -> Any:
                target = resolve_reference(
                    self.recipe, value, ref, earlier, where=f"stages.{name}.{fld}"
                )
                return self._input_of(target)

            out[fld] = map_refs(getattr(cfg, fld), one)
        return out

    def _input_of(self, target: Target) -> Any:
        if target.kind == "data":
            return DataInput(target.name, self.recipe.data[target.name])
        if target.kind == "external":
            return ExternalInput(target.name)
        info = self.outputs.get(target.name, {}).get(target.output or "")
        if info is None:
            return OutputInput(target.name, target.output or "", "?", Path())
        return OutputInput(
            target.name, target.output or "", info["kind"], self.run_dir / info["path"]
        )

    def _hashes(
        self, name: str, cfg: StageConfig, resolved: dict[str, Any]
    ) -> tuple[str, str | None]:
        """The stage's hash, and its hash without its extension settings (a training stage's
        seeds; None for a stage without any), from one digest of its inputs."""
        digests = self.digests.of_input(resolved, self.outputs)
        leave_out = cfg.extension_settings()
        base = (
            stage_hash(self.recipe, name, cfg, digests, leave_out=leave_out) if leave_out else None
        )
        return stage_hash(self.recipe, name, cfg, digests), base

    @staticmethod
    def _extends(folder: Path, marker: dict[str, Any] | None, h: str, base: str | None) -> bool:
        """A finished stage (intact outputs) whose hash differs only in its extension
        settings: other seeds of a training stage."""
        return (
            base is not None
            and marker is not None
            and marker.get("hash") != h
            and marker.get("base_hash") == base
            and is_done(folder, marker, marker["hash"])
        )

    def _check_data(self) -> None:
        """Fail before running anything if a dataset the stages read is missing."""
        used: set[str] = set()
        for name, cfg in self.recipe.stages.items():
            for fld in field_refs(type(cfg)):
                value = self._resolve(name, cfg)[fld]
                for item in iter_leaves(value):
                    if isinstance(item, DataInput):
                        used.add(item.name)
        missing = []
        for name in sorted(used):
            path = self.recipe.data[name].path
            if not path.startswith("hf:") and not Path(path.split("::")[0]).exists():
                missing.append(f"{name} ({path})")
        if missing:
            raise ConfigError(
                f"missing data: {', '.join(missing)}; fix the paths in the recipe or override "
                f"them, e.g. data.{missing[0].split()[0]}=PATH"
            )

    # ------------------------------------------------------------------ running

    def run(self) -> dict[str, Any]:
        """Run every stage that is not up to date; returns the manifest.

        SIGTERM interrupts the run as Ctrl-C does (``KeyboardInterrupt``, the stage's work
        kept for the next run to resume).
        """
        with _sigterm_interrupts():
            check_run_dir(self.run_dir, self.recipe.name, self.recipe.extends)
            self._check_data()
            t0 = time.time()
            claim_run_dir(self.run_dir, self.recipe.name)
            with locked(self.run_dir):
                with atomic_open(self.run_dir / CONFIG) as fh:
                    fh.write(dump_yaml(self.recipe.to_dict()))
                self.manifest.start(
                    self.recipe, recipe_path=self.recipe_path, overrides=self.overrides
                )
                n = len(self.recipe.stages)
                status = "failed"
                try:
                    for i, (name, cfg) in enumerate(self.recipe.stages.items(), start=1):
                        self._run_stage(i, n, name, cfg)
                    status = "complete"
                except KeyboardInterrupt:
                    status = "interrupted"
                    raise
                finally:
                    self.manifest.finish(status, round(time.time() - t0, 2))
                    self.digests.save()
        return self.manifest.data

    def _run_stage(self, i: int, n: int, name: str, cfg: StageConfig) -> None:
        spec = get_stage(cfg.stage)
        resolved = self._resolve(name, cfg)
        h, base = self._hashes(name, cfg, resolved)
        final = self.run_dir / name
        partial = self.run_dir / f"{name}.partial"
        entry = self.manifest.stage(name)
        entry["hash"] = h
        head = f"[{i}/{n}] {name} ({cfg.stage})"

        extended = False
        if not self._forced(name):
            for folder in (final, partial):
                marker = read_json(folder / MARKER)
                if self._extends(folder, marker, h, base):
                    # other seeds: the finished run becomes the attempt the stage resumes
                    if folder is final:
                        check_stage_folder(name, final, partial)
                        if partial.exists():
                            shutil.rmtree(partial)
                        final.rename(partial)
                    write_json({"hash": h, "started": utc_now()}, partial / ATTEMPT)
                    extended = True
                    break
                if marker is not None and is_done(folder, marker, h):
                    if folder is partial:  # cut between marker and rename: finish the rename
                        promote(partial, final, name)
                    self._adopt(name, marker)
                    entry.update(
                        status="skipped",
                        reason="up to date",
                        seconds=marker.get("seconds"),
                        cpu_seconds=marker.get("cpu_seconds"),
                        rows_in=marker.get("rows_in", {}),
                        rows_out=marker.get("rows_out", {}),
                        metrics=marker.get("metrics", {}),
                        outputs=self.outputs[name],
                        notes=marker.get("notes", []),
                    )
                    self.manifest.save()
                    self._say(f"[dim]↷ {head}: up to date, skipped[/dim]")
                    return

        attempt = read_json(partial / ATTEMPT)
        resumed = bool(
            partial.is_dir() and attempt and attempt.get("hash") == h and not self._forced(name)
        )
        # nothing zdebias did not write is removed: not in STAGE/ (replaced at the end), nor
        # a STAGE.partial/ that is not the run's work folder
        check_stage_folder(name, final, partial if partial.exists() and not resumed else None)
        if partial.exists() and not resumed:
            shutil.rmtree(partial)
        claim(partial, "stage", adopt=True)  # the run's own: a stage may write into it in place
        write_json({"hash": h, "started": utc_now()}, partial / ATTEMPT)
        old = read_json(final / MARKER)
        reason = (
            "forced"
            if self._forced(name)
            else "other seeds: finished seeds kept"
            if extended
            else "resumed"
            if resumed
            else "never run"
            if old is None
            else "settings or inputs changed"
        )
        ctx = StageContext(
            name=name,
            kind=cfg.stage,
            out_dir=partial,
            run_dir=self.run_dir,
            task=self.task,
            seed=self.recipe.stage_seed(name),
            resumed=resumed,
            progress=self.progress,
        )
        started = utc_now()
        entry.update(status="running", reason=reason, started=started)
        self.manifest.save()
        self._say(f"[bold]▶ {head}[/bold] [dim]({reason})[/dim]")
        t0, cpu0 = time.time(), _cpu_seconds()
        try:
            result = spec.fn(cfg, Inputs(resolved, ctx), ctx)
        except KeyboardInterrupt:
            entry.update(status="interrupted", seconds=round(time.time() - t0, 2))
            self.manifest.save()
            self._say(f"[yellow]✗ {head}: interrupted; rerun to resume[/yellow]")
            raise
        except BaseException as err:
            entry.update(status="failed", error=str(err), seconds=round(time.time() - t0, 2))
            self.manifest.save()
            raise
        seconds = round(time.time() - t0, 2)
        cpu_seconds = round(_cpu_seconds() - cpu0, 2)
        outputs = self._check_outputs(name, spec.outputs, result, partial)
        marker = {
            "hash": h,
            "base_hash": base,
            "name": name,
            "stage": cfg.stage,
            "settings": cfg.model_dump(mode="json"),
            "seed": ctx.seed,
            "started": started,
            "finished": utc_now(),
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "resumed": resumed,
            "rows_in": ctx.rows_in,
            "rows_out": result.rows_out,
            "metrics": result.metrics,
            "notes": ctx.notes,
            "outputs": outputs,
            "written": stage_files(partial),  # all the stage's files: others are not replaced
        }
        write_json(marker, partial / MARKER)
        (partial / ATTEMPT).unlink(missing_ok=True)
        promote(partial, final, name)
        self._adopt(name, marker)
        entry.update(
            status="done",
            seconds=seconds,
            cpu_seconds=cpu_seconds,
            finished=marker["finished"],
            resumed=resumed,
            rows_in=ctx.rows_in,
            rows_out=result.rows_out,
            metrics=result.metrics,
            outputs=self.outputs[name],
            notes=ctx.notes,
        )
        self.manifest.save()
        self.digests.save()
        rows = ", ".join(f"{k} {v:,}" for k, v in result.rows_out.items())
        self._say(f"[green]✓ {head}[/green] {seconds:.1f} s" + (f" — {rows}" if rows else ""))
        for note in ctx.notes:
            self._say(f"  [yellow]note:[/yellow] {note}")

    def _check_outputs(
        self, name: str, declared: dict[str, str], result: StageResult, folder: Path
    ) -> dict[str, dict[str, Any]]:
        if not isinstance(result, StageResult):
            raise ZdebiasError(f"stage {name!r} returned {type(result).__name__}, not StageResult")
        missing = [k for k in declared if k not in result.outputs]
        extra = [k for k in result.outputs if k not in declared]
        if missing or extra:
            raise ZdebiasError(
                f"stage {name!r} returned outputs {sorted(result.outputs)}, declared "
                f"{sorted(declared)}"
            )
        out: dict[str, dict[str, Any]] = {}
        for key, rel in result.outputs.items():
            path = folder / rel
            if not path.exists() or folder.resolve() not in path.resolve().parents:
                raise ZdebiasError(f"stage {name!r}: output {key!r} ({rel}) was not written")
            out[key] = {
                "path": rel,
                "kind": declared[key],
                "digest": self.digests.path(path),
                "files": file_stats(path),
            }
        return out

    def _adopt(self, name: str, marker: dict[str, Any]) -> None:
        self.outputs[name] = {
            key: {**info, "path": f"{name}/{info['path']}", "stage_hash": marker["hash"]}
            for key, info in marker["outputs"].items()
        }

    # ------------------------------------------------------------------ planning

    def plan(self) -> list[dict[str, Any]]:
        """What a run would do, stage by stage, without running or writing anything."""
        rows = []
        for name, cfg in self.recipe.stages.items():
            final = self.run_dir / name
            partial = self.run_dir / f"{name}.partial"
            row = {"name": name, "stage": cfg.stage}
            try:
                h, base = self._hashes(name, cfg, self._resolve(name, cfg))
            except InputPending as pending:
                row["action"] = f"run (after {pending.stage})"
                rows.append(row)
                continue
            except (ConfigError, DataError) as err:
                # a dry run reports an input it cannot read (e.g. a hub dataset offline)
                row["action"] = f"error: {err}"
                rows.append(row)
                continue
            marker = read_json(final / MARKER)
            attempt = read_json(partial / ATTEMPT)
            if self._forced(name):
                row["action"] = "run (forced)"
            elif self._extends(final, marker, h, base):
                row["action"] = "resume (other seeds)"
            elif marker is not None and is_done(final, marker, h):
                row["action"] = "skip (up to date)"
                self._adopt(name, marker)
            elif attempt and attempt.get("hash") == h:
                row["action"] = "resume (interrupted)"
            elif marker:
                row["action"] = "run (settings or inputs changed)"
            else:
                row["action"] = "run (never run)"
            rows.append(row)
        return rows

    def problems(self, plan: list[dict[str, Any]]) -> list[str]:
        """What would stop the run that ``plan`` (:meth:`plan`) describes: a run folder it may
        not use, stages whose inputs it cannot read."""
        found = [
            f"stages.{row['name']}: {row['action'].removeprefix('error: ')}"
            for row in plan
            if row["action"].startswith("error: ")
        ]
        for row in plan:  # a stage to redo whose folder holds a user's file
            if row["action"].startswith(("run", "resume")):
                try:
                    check_stage_folder(row["name"], self.run_dir / row["name"])
                except ConfigError as err:
                    found.append(str(err))
        try:
            check_run_dir(self.run_dir, self.recipe.name, self.recipe.extends)
        except ConfigError as err:
            found.insert(0, str(err))
        return found


def run_recipe(
    recipe: Recipe,
    run_dir: str | Path,
    *,
    force: bool | Collection[str] = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Run a recipe in ``run_dir`` (resuming / skipping what is done); returns the manifest.

    Ctrl-C or SIGTERM raise ``KeyboardInterrupt`` once the manifest says ``interrupted``; the
    same call again resumes. (:class:`Runner` takes the console and provenance options
    ``zdebias run`` uses; :func:`open_run` builds it from a recipe file and
    :class:`RunSettings`.)
    """
    return Runner(recipe, run_dir, force=force, progress=progress).run()


def plan_recipe(
    recipe: Recipe, run_dir: str | Path, *, force: bool | Collection[str] = False
) -> list[dict[str, Any]]:
    """What :func:`run_recipe` would do in ``run_dir``, stage by stage."""
    return Runner(recipe, run_dir, force=force).plan()


def open_run(
    recipe_path: str,
    overrides: Sequence[str],
    settings: RunSettings,
    *,
    progress: bool = True,
    console: Any = None,
) -> Runner:
    """The runner of a recipe file with ``key=value`` overrides, in the run folder
    ``settings.out`` (else the recipe's ``out``, else ``runs/NAME``), redoing what
    ``settings`` force; the file and overrides are kept in the manifest."""
    from zdebias.pipeline.loader import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    return Runner(
        recipe,
        run_dir_for(recipe, settings.out),
        force=settings.forced,
        progress=progress,
        console=console,
        recipe_path=recipe_path,
        overrides=overrides,
    )
