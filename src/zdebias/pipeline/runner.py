"""Run a recipe: stages in order, each skipped when done, redone when changed, resumed if cut.

Layout of a run folder::

    RUN_DIR/
      manifest.json          versions, seeds, resolved config, per-stage status, timings, rows
      config.yaml            the resolved recipe
      STAGE/                 one folder per finished stage, with its outputs and
        .zdebias-done.json   the done-marker: hash of settings + inputs, output digests, rows
      STAGE.partial/         the work folder of a stage that is running or was interrupted
      report.html            written by ``zdebias report`` (and at the end of ``zdebias run``)

A stage's hash covers its kind and version, its settings, the recipe's task, its seed, and the
content digests of everything it reads (declared data files; ``hf:`` datasets by the loaded
dataset's fingerprint, which follows the resolved revision; earlier stages' outputs as recorded
in their markers). A rerun skips a stage whose marker holds the same hash and whose outputs are
untouched, redoes it otherwise, and then redoes whatever reads outputs that changed. A stage
runs inside ``STAGE.partial/``; only when its function returns, its outputs are digested, the
marker is written and the folder is renamed to ``STAGE/``, so no finished-looking stage is ever
half written. An interrupted stage keeps its work folder: the next run hands it back to the
stage (``ctx.resumed``) when the hash is unchanged, so resumable stages (sampling, written in
shards) continue where they stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from zdebias.data.labels import get_task
from zdebias.data.writers import atomic_open, write_json
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.models.trainer_settings import CHECKPOINT_POLICY
from zdebias.pipeline.catalogue import get_stage
from zdebias.pipeline.config import Recipe, StageConfig, dump_yaml, field_refs, iter_leaves
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
from zdebias.settings import Settings, setting

MARKER = ".zdebias-done.json"
ATTEMPT = ".zdebias-attempt.json"
MANIFEST = "manifest.json"
_LOCK = ".zdebias-lock"
_CACHE = ".zdebias-digests.json"
_PACKAGES = (
    "zdebias",
    "torch",
    "transformers",
    "datasets",
    "accelerate",
    "numpy",
    "scipy",
    "scikit-learn",
    "pydantic",
    "pyyaml",
)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system), in seconds."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """Python, platform and the installed versions of the packages a run depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    out["cpu_count"] = str(os.cpu_count())
    return out


# --------------------------------------------------------------------------- digests


class Digests:
    """Content digests of files and folders, cached by (path, size, mtime) in the run folder."""

    def __init__(self, cache_file: Path | None) -> None:
        self.cache_file = cache_file
        self.cache: dict[str, str] = {}
        if cache_file is not None and cache_file.exists():
            with contextlib.suppress(ValueError, OSError):
                self.cache = json.loads(cache_file.read_text())
        self._dirty = False

    def file(self, path: Path) -> str:
        st = path.stat()
        key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        if key not in self.cache:
            h = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            self.cache[key] = h.hexdigest()
            self._dirty = True
        return self.cache[key]

    def path(self, path: Path) -> str:
        """Digest of a file, or of a folder's files (names and contents, markers excluded)."""
        if path.is_file():
            return self.file(path)
        h = hashlib.sha256()
        for rel, sub in _tree(path):
            h.update(rel.encode())
            h.update(self.file(sub).encode())
        return h.hexdigest()

    def save(self) -> None:
        if self._dirty and self.cache_file is not None:
            write_json(self.cache, self.cache_file)
            self._dirty = False


def _tree(path: Path) -> Iterator[tuple[str, Path]]:
    for sub in sorted(path.rglob("*")):
        if sub.is_file() and sub.name not in (MARKER, ATTEMPT):
            yield sub.relative_to(path).as_posix(), sub


def _fingerprint(path: Path) -> str:
    """A cheap identity of an external model folder: file names, sizes and mtimes."""
    h = hashlib.sha256()
    items = _tree(path) if path.is_dir() else [(path.name, path)]
    for rel, sub in items:
        st = sub.stat()
        h.update(f"{rel}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _file_stats(path: Path) -> dict[str, list[int]]:
    if path.is_file():
        st = path.stat()
        return {"": [st.st_size, st.st_mtime_ns]}
    out = {}
    for rel, sub in _tree(path):
        st = sub.stat()
        out[rel] = [st.st_size, st.st_mtime_ns]
    return out


def _intact(folder: Path, marker: dict[str, Any]) -> bool:
    """Every output file the marker lists is still there, same size and mtime."""
    for out in marker.get("outputs", {}).values():
        base = folder / out["path"]
        for rel, (size, mtime) in out.get("files", {}).items():
            p = base / rel if rel else base
            try:
                st = p.stat()
            except OSError:
                return False
            if st.st_size != size or st.st_mtime_ns != mtime:
                return False
    return True


def _record_killed(old: dict[str, Any]) -> None:
    """An earlier invocation still marked running (called under the run lock, so its process
    is gone: killed, or its machine lost) is recorded as ``killed``, with the stage it was in."""
    invocations = old.get("invocations") or []
    if old.get("status") != "running" and not (
        invocations and invocations[-1].get("status") == "running"
    ):
        return
    stage = next((e["name"] for e in old.get("stages", []) if e.get("status") == "running"), None)
    if invocations and invocations[-1].get("status") == "running":
        invocations[-1].update(status="killed", stage=stage, detected=_now())
    old["status"] = "killed"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


#: settings that change how a stage runs but not its output (kept out of the stage hash)
EXECUTION_SETTINGS = (*CHECKPOINT_POLICY, "workers", "threads")


def stage_hash(recipe: Recipe, name: str, cfg: StageConfig, input_digests: dict[str, Any]) -> str:
    """The hash a stage's marker must hold for the stage to count as done.

    Settings that decide how a stage runs, not what it writes (:data:`EXECUTION_SETTINGS`:
    how often a training stage saves checkpoints, how many processes or CPU threads sample)
    are left out: changing them neither redoes a finished stage nor throws away an
    interrupted one's work.
    """
    refs = field_refs(type(cfg))
    settings = cfg.model_dump(mode="json", exclude={"seed", *refs, *EXECUTION_SETTINGS})
    payload = {
        "kind": cfg.stage,
        "version": type(cfg).version,
        "settings": settings,
        "inputs": input_digests,
        "task": recipe.task,
        "seed": recipe.stage_seed(name),
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the runner


class RunSettings(Settings):
    """How ``zdebias run`` treats a recipe: where, what to redo, whether to report."""

    out: str | None = setting(
        None, "Run folder (default: the recipe's `out`, else runs/NAME).", short="-o"
    )
    dry_run: bool = setting(False, "Print the resolved recipe and what would run; run nothing.")
    force: bool = setting(False, "Redo every stage, even those that are done.")
    redo: list[str] = setting(
        default_factory=list, help="Redo this stage (repeatable).", repeat=True
    )
    report: bool = setting(True, "Write RUN/report.html at the end.")

    @property
    def forced(self) -> bool | list[str]:
        """What :class:`Runner` redoes: everything, or the named stages."""
        return True if self.force else list(self.redo)


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
        self.digests = Digests(self.run_dir / _CACHE)
        self._hf_fingerprints: dict[str, dict[str, Any]] = {}
        #: stage name → its marker's outputs (path relative to the run folder, digest, kind)
        self.outputs: dict[str, dict[str, dict[str, Any]]] = {}
        self.manifest: dict[str, Any] = {}

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

    def _digest_of(self, value: Any) -> Any:
        if isinstance(value, DataInput):
            spec = value.spec
            options = spec.model_dump(mode="json", exclude={"path"})
            if spec.path.startswith("hf:"):
                # the loaded dataset's fingerprint: a changed revision or hub dataset reruns
                if spec.path not in self._hf_fingerprints:
                    from zdebias.data.hf import fingerprint

                    self._hf_fingerprints[spec.path] = fingerprint(spec.path)
                return {**self._hf_fingerprints[spec.path], **options}
            path = Path(spec.path.split("::")[0])
            if not path.exists():
                raise ConfigError(f"data {value.name!r}: {spec.path}: no such file or folder")
            return {"digest": self.digests.path(path), "split": spec.path, **options}
        if isinstance(value, ExternalInput):
            path = Path(value.value)
            if path.exists():
                return {"local": _fingerprint(path)}
            return {"name": value.value}
        if isinstance(value, OutputInput):
            info = self.outputs.get(value.stage, {}).get(value.output)
            if info is None:
                raise _Pending(value.stage)
            return {"stage": info["stage_hash"], "output": info["digest"]}
        if isinstance(value, dict):
            return {k: self._digest_of(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._digest_of(v) for v in value]
        return None

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

    # ------------------------------------------------------------------ manifest

    def _start_manifest(self) -> None:
        old = _read_json(self.run_dir / MANIFEST) or {}
        _record_killed(old)
        now = _now()
        self.manifest = {
            "name": self.recipe.name,
            "recipe": self.recipe_path,
            "overrides": self.overrides,
            "seed": self.recipe.seed,
            "task": self.recipe.task,
            "status": "running",
            "created": old.get("created", now),
            "started": now,
            "finished": None,
            "seconds": None,
            "versions": versions(),
            "config": self.recipe.to_dict(),
            "invocations": [
                *old.get("invocations", []),
                {
                    "started": now,
                    "status": "running",
                    "pid": os.getpid(),
                    "host": platform.node(),
                },
            ],
            "stages": [
                {
                    "name": n,
                    "stage": c.stage,
                    "status": "pending",
                    "seed": self.recipe.stage_seed(n),
                }
                for n, c in self.recipe.stages.items()
            ],
        }
        self._save_manifest()

    def _entry(self, name: str) -> dict[str, Any]:
        return next(e for e in self.manifest["stages"] if e["name"] == name)

    def _save_manifest(self) -> None:
        write_json(self.manifest, self.run_dir / MANIFEST)

    def _finish_manifest(self, status: str, t0: float) -> None:
        self.manifest["status"] = status
        self.manifest["finished"] = _now()
        self.manifest["seconds"] = round(time.time() - t0, 2)
        self.manifest["invocations"][-1].update(
            status=status, finished=self.manifest["finished"], seconds=self.manifest["seconds"]
        )
        self._save_manifest()
        self.digests.save()

    # ------------------------------------------------------------------ running

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        import fcntl

        self.run_dir.mkdir(parents=True, exist_ok=True)
        fh = (self.run_dir / _LOCK).open("w")
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise ConfigError(
                    f"{self.run_dir}: another zdebias run is using this folder"
                ) from None
            yield
        finally:
            fh.close()

    def _check_run_dir(self) -> None:
        """The run folder is new, empty, or one a run made (manifest or lock): a run never
        mixes its files into a foreign folder."""
        folder = self.run_dir
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{folder} is a file; choose a folder for the run (--out)")
        own = (folder / MANIFEST).is_file() or (folder / _LOCK).is_file()
        if folder.is_dir() and not own and any(folder.iterdir()):
            raise ConfigError(
                f"{folder}: not a run folder (no {MANIFEST}) and not empty; choose a new --out"
            )

    def run(self) -> dict[str, Any]:
        """Run every stage that is not up to date; returns the manifest."""
        self._check_run_dir()
        self._check_data()
        t0 = time.time()
        with self._lock():
            with atomic_open(self.run_dir / "config.yaml") as fh:
                fh.write(dump_yaml(self.recipe.to_dict()))
            self._start_manifest()
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
                self._finish_manifest(status, t0)
        return self.manifest

    def _run_stage(self, i: int, n: int, name: str, cfg: StageConfig) -> None:
        spec = get_stage(cfg.stage)
        resolved = self._resolve(name, cfg)
        h = stage_hash(self.recipe, name, cfg, self._digest_of(resolved))
        final = self.run_dir / name
        partial = self.run_dir / f"{name}.partial"
        entry = self._entry(name)
        entry["hash"] = h
        head = f"[{i}/{n}] {name} ({cfg.stage})"

        if not self._forced(name):
            for folder in (final, partial):
                marker = _read_json(folder / MARKER)
                if marker and marker.get("hash") == h and _intact(folder, marker):
                    if folder is partial:  # cut between marker and rename: finish the rename
                        self._promote(partial, final)
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
                    self._save_manifest()
                    self._say(f"[dim]↷ {head}: up to date, skipped[/dim]")
                    return

        attempt = _read_json(partial / ATTEMPT)
        resumed = bool(
            partial.is_dir() and attempt and attempt.get("hash") == h and not self._forced(name)
        )
        if partial.exists() and not resumed:
            shutil.rmtree(partial)
        partial.mkdir(parents=True, exist_ok=True)
        write_json({"hash": h, "started": _now()}, partial / ATTEMPT)
        old = _read_json(final / MARKER)
        reason = (
            "forced"
            if self._forced(name)
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
        started = _now()
        entry.update(status="running", reason=reason, started=started)
        self._save_manifest()
        self._say(f"[bold]▶ {head}[/bold] [dim]({reason})[/dim]")
        t0, cpu0 = time.time(), _cpu_seconds()
        try:
            result = spec.fn(cfg, Inputs(resolved, ctx), ctx)
        except KeyboardInterrupt:
            entry.update(status="interrupted", seconds=round(time.time() - t0, 2))
            self._save_manifest()
            self._say(f"[yellow]✗ {head}: interrupted; rerun to resume[/yellow]")
            raise
        except BaseException as err:
            entry.update(status="failed", error=str(err), seconds=round(time.time() - t0, 2))
            self._save_manifest()
            raise
        seconds = round(time.time() - t0, 2)
        cpu_seconds = round(_cpu_seconds() - cpu0, 2)
        outputs = self._check_outputs(name, spec.outputs, result, partial)
        marker = {
            "hash": h,
            "name": name,
            "stage": cfg.stage,
            "settings": cfg.model_dump(mode="json"),
            "seed": ctx.seed,
            "started": started,
            "finished": _now(),
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "resumed": resumed,
            "rows_in": ctx.rows_in,
            "rows_out": result.rows_out,
            "metrics": result.metrics,
            "notes": ctx.notes,
            "outputs": outputs,
        }
        write_json(marker, partial / MARKER)
        (partial / ATTEMPT).unlink(missing_ok=True)
        self._promote(partial, final)
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
        self._save_manifest()
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
                "files": _file_stats(path),
            }
        return out

    def _promote(self, partial: Path, final: Path) -> None:
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)

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
                h = stage_hash(self.recipe, name, cfg, self._digest_of(self._resolve(name, cfg)))
            except _Pending as pending:
                row["action"] = f"run (after {pending.stage})"
                rows.append(row)
                continue
            except (ConfigError, DataError) as err:
                # a dry run reports an input it cannot read (e.g. a hub dataset offline)
                row["action"] = f"error: {err}"
                rows.append(row)
                continue
            marker = _read_json(final / MARKER)
            attempt = _read_json(partial / ATTEMPT)
            if self._forced(name):
                row["action"] = "run (forced)"
            elif marker and marker.get("hash") == h and _intact(final, marker):
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


class _Pending(Exception):
    """An input comes from a stage that has not produced it yet (planning only)."""

    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


def run_recipe(
    recipe: Recipe,
    run_dir: str | Path,
    *,
    force: bool | Collection[str] = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Run a recipe in ``run_dir`` (resuming / skipping what is done); returns the manifest.

    (:class:`Runner` takes the console and provenance options ``zdebias run`` uses.)
    """
    return Runner(recipe, run_dir, force=force, progress=progress).run()


def plan_recipe(
    recipe: Recipe, run_dir: str | Path, *, force: bool | Collection[str] = False
) -> list[dict[str, Any]]:
    """What :func:`run_recipe` would do in ``run_dir``, stage by stage."""
    return Runner(recipe, run_dir, force=force).plan()


def run_dir_for(recipe: Recipe, out: str | None) -> Path:
    """The run folder: ``--out``, else the recipe's ``out``, else ``runs/NAME``."""
    return Path(out or recipe.out or f"runs/{recipe.name}")
