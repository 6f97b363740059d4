"""Command-line options generated from settings objects, so each setting is declared once.

A command names its settings objects as parameters; :func:`command` replaces each such
parameter by one option per field (``batch_size`` → ``--batch-size``, help from the field's
description, default and choices from its type) and hands the command validated objects::

    @command
    def filter_command(input: InputArg, out: OutDir, settings: ZFilterSettings,
                       read: ReadOptions, cli: CliOptions) -> None: ...

A value that fails validation ends in one line naming the flag (exit 2). Old flag spellings
listed in a field's ``deprecated`` metadata still work for one release, with a warning.
An option given twice, or with its old spelling beside it, is refused in one line
(:func:`given_once`, applied to the whole app): only options declared to repeat
(``repeat=True``, ``list[str]`` options such as ``--suite``) take several occurrences.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import types
import warnings
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

import typer
from pydantic import BaseModel

from zdebias.errors import ConfigError
from zdebias.settings import Settings, cli_meta, setting

log = logging.getLogger("zdebias")

InputArg = Annotated[
    str | None,
    typer.Argument(
        help="Input: a file (any supported format, .arrow too), DIR or DIR::SPLIT of a "
        "triplet or save_to_disk folder, or hf:NAME[@CONFIG][:SPLIT[@REVISION]].",
        show_default=False,
    ),
]


class Verbosity(Settings):
    """How much a command says: given before the command (``zdebias -q filter``) or after."""

    help_panel: ClassVar[str] = "Output"

    quiet: bool = setting(False, "Only warnings and errors; no progress bars.", short="-q")
    verbose: bool = setting(False, "Also debug messages.", short="-v")


class CliOptions(Verbosity):
    """What every command shares: JSON output, overwrite policy, verbosity."""

    json_out: bool = setting(False, "Print the result as JSON on stdout.", flag="--json")
    overwrite: bool = setting(False, "Replace a non-empty output (refused without it).")

    @property
    def progress(self) -> bool:
        """Whether to show progress bars."""
        return not self.quiet


#: the verbosity given before the command (``zdebias -q COMMAND``); commands add their own
_ROOT = Verbosity()
#: the argument and option values of the command running now (:func:`given_values`)
_GIVEN: list[Any] = []
#: what the running command holds until it returns (the locks of its output files)
_HELD: list[contextlib.ExitStack] = []


def hold_for_command(manager: contextlib.AbstractContextManager[Any]) -> None:
    """Enter ``manager`` (e.g. an output's lock) and leave it when the running command
    returns or fails; outside a command it is entered and left at once."""
    if not _HELD:
        with manager:
            return
    _HELD[-1].enter_context(manager)


def given_values() -> list[Any]:
    """The raw argument and option values of the running command, in declaration order (the
    output policy checks that ``--out`` replaces none of the paths given)."""
    return list(_GIVEN)


# --------------------------------------------------------------------------- field → option


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _cli_type(tp: Any) -> Any:
    """The type typer parses: scalars and Literals as they are, anything else as text."""
    inner, _ = _strip_optional(tp)
    if inner in (int, float, str, bool) or get_origin(inner) is Literal:
        return inner
    return str  # paths, lists (comma-separated), mappings (a=b,c=d): parsed by the model


def _from_text(tp: Any, value: Any) -> Any:
    """A CLI string for a list / tuple / dict field, as the data pydantic validates."""
    if not isinstance(value, str):
        return value
    inner, _ = _strip_optional(tp)
    origin = get_origin(inner)
    if origin in (list, tuple, set):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value  # dicts: the field's own validator parses "a=b,c=d"


def flag_of(name: str, info: Any) -> str:
    """The CLI flag of a settings field."""
    return cli_meta(info)["flag"] or "--" + name.replace("_", "-")


def _option(name: str, info: Any, tp: Any, panel: str | None) -> tuple[Any, Any]:
    """(annotation, default) of the typer parameter for one field."""
    meta = cli_meta(info)
    flag = flag_of(name, info)
    cli_tp = _cli_type(tp)
    decls = [flag]
    if cli_tp is bool and info.default is True:
        decls = [f"{flag}/--no-{flag[2:]}"]
    if meta["short"]:
        decls.append(meta["short"])
    required = info.is_required()
    default: Any = None
    show_default: bool | str = True
    if not required:
        if info.default_factory is not None:
            show_default = False
        else:
            default = info.default
    _, optional = _strip_optional(tp)
    annotation = (
        cli_tp if (cli_tp is bool or (not optional and default is not None)) else (cli_tp | None)
    )
    if meta["repeat"]:
        annotation, default, show_default = list[str] | None, None, False
    if get_origin(_strip_optional(tp)[0]) in (list, tuple, set, dict):
        _COMMA_LISTS.add(name)
    help_text = info.description or ""
    if cli_tp is bool and info.default is not True:
        show_default = False
    opt = typer.Option(*decls, help=help_text, show_default=show_default, rich_help_panel=panel)
    return Annotated[annotation, opt], (... if required else default)


def _panel(model: type[BaseModel], field: str) -> str | None:
    """The help panel of a field: ``help_panel`` of the class that declares it."""
    for klass in model.__mro__:
        if field in getattr(klass, "__annotations__", {}):
            return getattr(klass, "help_panel", None)
    return None


def _deprecated_option(old: str, tp: Any) -> tuple[Any, Any]:
    cli_tp = _cli_type(tp)
    if cli_tp is bool:
        return Annotated[bool | None, typer.Option(old, hidden=True)], None
    return Annotated[cli_tp | None, typer.Option(old, hidden=True)], None


def _dep_param(name: str, i: int) -> str:
    return f"{name}__deprecated{i}"


# --------------------------------------------------------------------------- the decorator


def _settings_params(fn: Callable[..., Any]) -> dict[str, type[Settings]]:
    hints = get_type_hints(fn)
    return {
        name: tp
        for name, tp in hints.items()
        if isinstance(tp, type) and issubclass(tp, Settings) and name != "return"
    }


def build(model: type[Settings], values: dict[str, Any]) -> Any:
    """A validated settings object from CLI values, failing with the flag's name."""
    flags = {name: flag_of(name, info) for name, info in model.model_fields.items()}
    return model.checked(values, names=flags)


def command(
    fn: Callable[..., Any] | None = None,
    *,
    exclude: tuple[str, ...] = (),
    renamed: dict[str, str] | None = None,
) -> Any:
    """Generate a command's options from the settings objects it takes (see module doc).

    ``exclude``: fields not offered by this command (their defaults apply). ``renamed``: old
    flag → the plain parameter it now feeds (e.g. ``{"--data": "input"}``), accepted for one
    release with a deprecation warning.
    """
    if fn is None:
        return functools.partial(command, exclude=exclude, renamed=renamed)
    renamed = dict(renamed or {})
    models = _settings_params(fn)
    sig = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)
    params: list[inspect.Parameter] = []
    owners: dict[str, list[str]] = {}  # field name → settings parameters it feeds
    deprecated: dict[str, tuple[str, str]] = {}  # hidden param → (field, old flag)
    fixed: dict[str, str] = {}  # hidden param → the value its old flag stands for
    field_types: dict[str, Any] = {}
    field_infos: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if pname not in models:
            params.append(param.replace(annotation=hints.get(pname, param.annotation)))
            continue
        model = models[pname]
        for fname, info in model.model_fields.items():
            if fname in exclude or not cli_meta(info)["cli"]:
                continue
            owners.setdefault(fname, []).append(pname)
            if fname in field_types:
                continue  # one option feeds every settings object that has the field
            tp = info.annotation
            field_types[fname] = tp
            field_infos[fname] = info
            annotation, default = _option(fname, info, tp, _panel(model, fname))
            params.append(
                inspect.Parameter(
                    fname, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
                )
            )
            old_flags = [d for d in cli_meta(info)["deprecated"] if d.startswith("-")]
            for i, old in enumerate(old_flags):
                hidden = _dep_param(fname, i)
                deprecated[hidden] = (fname, old)
                ann, dflt = _deprecated_option(old, tp)
                if "=" in old:  # "--free=false": an old flag that sets the field to a value
                    flag, _, fixed[hidden] = old.partition("=")
                    ann, dflt = Annotated[bool, typer.Option(flag, hidden=True)], False
                params.append(
                    inspect.Parameter(
                        hidden, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=dflt
                    )
                )
    for i, (old, target) in enumerate(renamed.items()):
        hidden = f"{target}__renamed{i}"
        deprecated[hidden] = (target, old)
        option = typer.Option(old, hidden=True)
        params.append(
            inspect.Parameter(
                hidden,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[str | None, option],
                default=None,
            )
        )
    names = [p.name for p in params]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        raise TypeError(f"{fn.__name__}: parameter names clash: {sorted(clash)}")
    # positional-or-keyword parameters (typer arguments) first, then the options
    params.sort(key=lambda p: p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        _GIVEN[:] = list(kwargs.values())
        for hidden, (fname, old) in deprecated.items():
            value = kwargs.pop(hidden, None)
            if hidden in fixed:
                value, old = (fixed[hidden] if value else None), old.partition("=")[0]
            if value is not None:
                new = (
                    flag_of(fname, field_infos[fname])
                    if fname in field_infos
                    else (fname.upper() if fname == "input" else "--" + fname.replace("_", "-"))
                )
                if fixed.get(hidden) == "false":
                    new = "--no-" + new[2:]
                current = kwargs.get(fname)
                if fname in field_infos:  # a field: the new flag may only hold its default
                    given = current is not None and current != field_infos[fname].default
                else:  # a renamed plain argument
                    given = current is not None
                if given and current != value:
                    raise ConfigError(f"{old} (deprecated) and {new} disagree; give only {new}")
                log.warning("%s is deprecated; use %s", old, new)
                kwargs[fname] = value
        call: dict[str, Any] = {}
        values: dict[str, dict[str, Any]] = {p: {} for p in models}
        for key, value in kwargs.items():
            if key in owners:
                if value is None and field_infos[key].default_factory is not None:
                    continue
                value = _from_text(field_types[key], value)
                for owner in owners[key]:
                    values[owner][key] = value
            else:
                call[key] = value
        global _ROOT
        for pname, model in models.items():
            if issubclass(model, CliOptions):  # -q/-v before the command count too
                for key in ("quiet", "verbose"):
                    values[pname][key] = values[pname].get(key) or getattr(_ROOT, key)
            call[pname] = build(model, values[pname])
            if isinstance(call[pname], Verbosity):
                configure_logging(call[pname])
                if not isinstance(call[pname], CliOptions):
                    _ROOT = call[pname]
        with contextlib.ExitStack() as held:
            _HELD.append(held)
            try:
                return fn(**call)
            finally:
                _HELD.pop()

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.settings_models = dict(models)  # type: ignore[attr-defined]
    wrapper.settings_excluded = tuple(exclude)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    # no __wrapped__ (functools.wraps set it): the signature above is the one to read
    vars(wrapper).pop("__wrapped__", None)
    return wrapper


# --------------------------------------------------------------------------- given once

#: the parameters whose value is a comma-separated list or mapping (``--columns a=b,c=d``):
#: a repeat of one of them is answered with how to give several items at once
_COMMA_LISTS: set[str] = set()


def _fed(name: str) -> str:
    """The field or argument a command parameter feeds: a hidden old spelling's
    (``learning_rate__deprecated0``, ``input__renamed0``) is its new one's."""
    return name.split("__", 1)[0]


def _spelling(param: Any) -> str:
    """How a parameter is written: ``--overwrite``, ``--json/--no-json``, ``INPUT``."""
    if type(param).__name__.endswith("Argument"):
        return (param.name or "").upper()
    longs = [o for o in param.opts if o.startswith("--")] or list(param.opts)
    return "/".join([longs[0], *param.secondary_opts[:1]])


def check_given_once(ctx: Any, order: list[Any], values: dict[str, Any]) -> None:
    """Refuse an option given twice, and an old spelling given with its new one (or with
    another old one): the parser would keep the last one silently. ``order``: the
    parameters as the parser met them (one entry per occurrence); ``values``: what it
    parsed. Options meant to repeat (``--suite``, ``--set``) and eager ones (``--help``)
    may repeat."""
    first: dict[str, Any] = {}
    for param in order:
        if getattr(param, "multiple", False) or getattr(param, "count", False):
            continue
        if param.is_eager or param.name is None:
            continue
        if type(param).__name__.endswith("Argument") and values.get(param.name) is None:
            continue  # an argument is met once, given or not
        fed = _fed(param.name)
        seen = first.setdefault(fed, param)
        if seen is param and order.count(param) == 1:
            continue
        if seen is param:
            hint = "give it once"
            if fed in _COMMA_LISTS:
                hint += " (several items go in one comma-separated value)"
            ctx.fail(f"{_spelling(param)} is given twice; {hint}")
        new = next((p for p in ctx.command.params if p.name == fed), None)
        old = [_spelling(p) for p in (seen, param) if p is not new]
        what = (
            f"{old[0]} is an old spelling"
            if len(old) == 1
            else f"{old[0]} and {old[1]} are old spellings"
        )
        verb = "disagree" if values.get(seen.name) != values.get(param.name) else "are both given"
        only = f"; give only {_spelling(new)}" if new is not None else ""
        ctx.fail(
            f"{_spelling(seen)} and {_spelling(param)} {verb} ({what} of the same setting){only}"
        )


class _GivenOnce:
    """A command (mixed into typer's) whose options may be given once each
    (:func:`check_given_once`), checked before any value is used."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and not ctx.resilient_parsing:
            parser = self.make_parser(ctx)  # type: ignore[attr-defined]
            values, _, order = parser.parse_args(args=list(args))
            check_given_once(ctx, order, values)
        return super().parse_args(ctx, args)  # type: ignore[misc]


class GivenOnceCommand(_GivenOnce, typer.core.TyperCommand):
    """A typer command whose options may be given once each."""


class GivenOnceGroup(_GivenOnce, typer.core.TyperGroup):
    """A typer group whose own options (``zdebias -q``) may be given once each."""


def given_once(app: typer.Typer) -> typer.Typer:
    """``app`` with every command and group, its sub-apps' too, refusing a repeated option
    (:class:`GivenOnceCommand`); a command with a class of its own keeps it."""
    from typer.models import DefaultPlaceholder

    if app.info.cls in (None, typer.core.TyperGroup) or isinstance(
        app.info.cls, DefaultPlaceholder
    ):
        app.info.cls = GivenOnceGroup
    for info in app.registered_commands:
        if info.cls in (None, typer.core.TyperCommand):
            info.cls = GivenOnceCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            given_once(group.typer_instance)
    return app


def configure_logging(cli: Verbosity) -> None:
    """Messages go to stderr through ``logging``: -q warnings only, -v debug. Under a launcher
    (``torchrun``), processes other than rank 0 report errors only: the main one speaks for
    all (``zdebias.models.distributed``)."""
    level = logging.WARNING if cli.quiet else logging.DEBUG if cli.verbose else logging.INFO
    if int(os.environ.get("RANK", "0") or 0) > 0:
        level = max(level, logging.ERROR)
    root = logging.getLogger("zdebias")
    root.setLevel(level)
    if not any(getattr(h, "_zdebias", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._zdebias = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
    for h in root.handlers:
        if isinstance(h, logging.StreamHandler) and getattr(h, "_zdebias", False):
            h.stream = sys.stderr  # the current stderr (tests swap it)
    library_bars(not cli.quiet)


#: the environment variables that turn the HF libraries' own progress bars off (model
#: loading and saving, downloads, dataset maps), read when they are imported
_BARS_OFF = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")
#: those of them set by :func:`library_bars` (a user's own setting is left alone)
_BARS_SET: set[str] = set()


def library_bars(show: bool) -> None:
    """The progress bars of transformers, huggingface_hub and datasets on or off (``-q``):
    through the environment for a library not imported yet (nothing is imported here), and
    through its own switch for one already imported."""
    for name in _BARS_OFF:
        if not show and name not in os.environ:
            os.environ[name] = "1"
            _BARS_SET.add(name)
        elif show and name in _BARS_SET:
            os.environ.pop(name, None)
            _BARS_SET.discard(name)
    for module, name, env in (
        ("transformers.utils.logging", "progress_bar", _BARS_OFF[0]),
        ("datasets.utils.tqdm", "progress_bars", _BARS_OFF[1]),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None and not (show and env in os.environ):  # the user's "off" wins
            with warnings.catch_warnings():  # a library that read our "off" at import: stays
                warnings.simplefilter("ignore")
                getattr(loaded, f"{'enable' if show else 'disable'}_{name}")()


__all__ = [
    "CliOptions",
    "InputArg",
    "Verbosity",
    "build",
    "check_given_once",
    "command",
    "configure_logging",
    "flag_of",
    "given_once",
    "library_bars",
]
