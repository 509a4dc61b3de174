"""Plumbing shared by the sub-commands: lazy sub-parsers and the options every command has.

Why lazy: building a sub-command's options imports its stage (torch, diffusers, transformers),
which takes seconds. ``conceptforge --help`` and ``conceptforge evaluate --help`` only need each
sub-command's name and one-line help, so a sub-command's module is imported (and its options
added) only when argparse actually selects it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    """One sub-command: the module that implements it and its one-line help."""

    module: str
    help: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``error: …`` line, like every other bad input.

    argparse prints the usage block and then ``prog: error: …``; a bad flag is bad input like any
    other, so it raises :class:`~conceptforge.errors.InvalidArgumentError` instead, which the
    command line prints as one line with exit 2 (``--help`` still shows the usage). Sub-parsers
    inherit the class.
    """

    def error(self, message: str):  # noqa: D102 - argparse hook
        from conceptforge.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{self.prog}: {message} (see {self.prog} --help)")

    def add_check(self, check: Callable[[argparse.Namespace], None]) -> None:
        """A check across flags, run as soon as this parser has parsed its arguments.

        Why: argparse cannot say "results files or ``--hub``"; a check in ``run`` would come after
        the command started (and the flag walk's missing-argument case would pass unrefused). The
        check raises :class:`~conceptforge.errors.InvalidArgumentError` for a bad combination."""
        self.__dict__.setdefault("_checks", []).append(check)

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - argparse hook
        namespace, extras = super().parse_known_args(args, namespace)
        for check in self.__dict__.get("_checks", ()):
            check(namespace)
        return namespace, extras


class LazySubParsersAction(argparse._SubParsersAction):
    """A sub-parsers action whose sub-parsers are filled in only when chosen."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._fill: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def add_lazy_parser(
        self, name: str, *, help: str, fill: Callable[[argparse.ArgumentParser], None]
    ) -> argparse.ArgumentParser:
        parser = self.add_parser(name, help=help, description=help)
        self._fill[name] = fill
        return parser

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: D102 - argparse hook
        name = values[0]
        fill = self._fill.pop(name, None)
        if fill is not None:
            fill(self._name_parser_map[name])
        super().__call__(parser, namespace, values, option_string)


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """``-v``: debug logging. SUPPRESS keeps a ``-v`` given before the sub-command."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")


def add_subcommands(
    parser: argparse.ArgumentParser,
    entries: dict[str, Entry],
    *,
    dest: str,
    title: str = "commands",
    required: bool = True,
) -> LazySubParsersAction:
    """Sub-parsers for ``entries``: each module's ``add_arguments`` runs only when it is chosen.

    ``required=False`` lets a command also run without a sub-command (``args.<dest>`` is None),
    e.g. ``evaluate`` driven by flags of its own.
    """
    action = parser.add_subparsers(
        dest=dest, required=required, metavar=f"{{{','.join(entries)}}}", title=title, action=LazySubParsersAction
    )

    def filler(entry: Entry) -> Callable[[argparse.ArgumentParser], None]:
        def fill(sub: argparse.ArgumentParser) -> None:
            entry.load().add_arguments(sub)
            if not any("--verbose" in a.option_strings for a in sub._actions):
                add_verbose(sub)

        return fill

    for name, entry in entries.items():
        action.add_lazy_parser(name, help=entry.help, fill=filler(entry))
    return action


def walk_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree under ``parser`` with the sub-command names that reach it.

    Lazy sub-parsers are filled on the way (this imports every sub-command's module): for tools
    and tests that look at all flags at once, e.g. the test that walks every flag.
    """
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            pending = getattr(action, "_fill", {})
            for name, sub in action._name_parser_map.items():
                fill = pending.pop(name, None)
                if fill is not None:
                    fill(sub)
                yield from walk_parsers(sub, (*path, name))


def run_entry(entries: dict[str, Entry], name: str, args: argparse.Namespace) -> int:
    """Run the chosen sub-command's module."""
    return int(entries[name].load().run(args) or 0)


def add_run_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    chunk_size: int | None = None,
    chunk_help: str | None = None,
    max_items_flag: str | None = None,
    max_items_help: str | None = None,
) -> None:
    """The run options every stage command shares: ``--num-shards``/``--shard-index`` (see
    :mod:`conceptforge.engine.launchers`), and where the command has them ``--chunk-size`` (default
    ``chunk_size``) and a stop-after flag (``--max-items``/``--max-images``). They say how this
    process runs, never what the data is. Their values are checked by :mod:`conceptforge.argtypes`."""
    from conceptforge import argtypes as at

    parser.add_argument("--num-shards", type=at.positive_int, default=None)
    parser.add_argument("--shard-index", type=at.non_negative_int, default=None)
    if chunk_size is not None:
        parser.add_argument("--chunk-size", type=at.positive_int, default=chunk_size, help=chunk_help)
    if max_items_flag is not None:
        parser.add_argument(max_items_flag, type=at.non_negative_int, default=None, help=max_items_help)


def settings_from_args(
    cls: type[T], args: argparse.Namespace, *, prefix: str = "", defaults: Collection[str] = (), **given: Any
) -> T:
    """The settings dataclass ``cls`` from the flags: each field takes the flag whose dest is
    ``prefix`` + its name, unless ``given`` names it (a flag of another name, or a value worked out
    from several) or ``defaults`` does (no flag sets it: the field keeps its default). A field that
    none of these sets is a programming error, raised at once rather than left at its default: a
    settings field added without its flag must not pass unnoticed."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not field.init or field.name in defaults:
            continue
        if field.name in given:
            values[field.name] = given.pop(field.name)
        elif hasattr(args, prefix + field.name):
            values[field.name] = getattr(args, prefix + field.name)
        else:
            raise TypeError(f"{cls.__name__}.{field.name}: no flag {prefix + field.name} and no value given")
    if given:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(given)}")
    return cls(**values)


def check_chunk_size(args: argparse.Namespace) -> None:
    """``--chunk-size`` must be >= 1 (one error line, before anything is written)."""
    from conceptforge.errors import InvalidArgumentError

    if args.chunk_size < 1:
        raise InvalidArgumentError(f"--chunk-size must be >= 1, got {args.chunk_size}")


def shard_of(args: argparse.Namespace):
    """This process's :class:`~conceptforge.engine.workitems.ShardSpec` from the run options and the launcher."""
    from conceptforge.engine.launchers import resolve_shard

    return resolve_shard(args.num_shards, args.shard_index)


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor`` / ``--ray-address`` for the stage commands (docs/cluster.md, "Ray")."""
    group = parser.add_argument_group("executor")
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where chunks are made: this process (default) or a Ray cluster (pip install 'conceptforge[ray]')",
    )
    group.add_argument(
        "--ray-address",
        help="with --executor ray: the cluster to join (auto, ray://HOST:10001); default a local one via ray.init()",
    )


@contextmanager
def executor_for(args: argparse.Namespace) -> Iterator[None]:
    """Within the block, the stage runs chunks on the executor the command line chose."""
    from conceptforge.engine.ray_executor import executor_from_args
    from conceptforge.engine.runner import use_executor

    executor = executor_from_args(getattr(args, "executor", "local"), getattr(args, "ray_address", None))
    try:
        if executor is not None and not getattr(args, "dry_run", False):
            executor.start()  # before the command writes its first file (a binding repo's record)
        with use_executor(executor):
            yield
    finally:
        if executor is not None and hasattr(executor, "close"):
            executor.close()


def add_endpoint_flags(group: Any, *, prefix: str = "", budget: bool = True) -> None:
    """``--endpoint-concurrency``, ``--endpoint-timeout``, ``--max-requests``: the client of a served
    model (``--model endpoint:NAME@URL``); checked here, before anything runs."""
    from conceptforge import argtypes as at

    for name, kind, what, served_default in (
        ("concurrency", at.positive_int, "requests in flight at once", 8),
        ("timeout", at.positive_float, "seconds to wait for one answer before retrying", 120),
    ):
        group.add_argument(
            f"--endpoint-{name}",
            dest=f"{prefix}endpoint_{name}",
            type=kind,
            default=None,  # None: not given (refused with a local model), served_default for a served one
            help=f"served model: {what} (default {served_default})",
        )
    if not budget:
        return
    group.add_argument(
        "--max-requests",
        dest=prefix + "max_requests",
        type=at.non_negative_int,
        help="served model: refuse, before it starts, a run that needs more uncached requests than this",
    )


def add_bootstrap_flags(group: Any, *, where: str, prefix: str = "") -> None:
    """``--bootstrap-resamples``, ``--bootstrap-seed``: the leaderboard's intervals. One definition
    for ``leaderboard`` and a sweep's leaderboard, so both resample alike by default."""
    from conceptforge import argtypes as at

    for name, kind, default, metavar, what in (
        ("resamples", at.positive_int, 1000, "N", "bootstrap resamples per interval"),
        ("seed", at.seed, 0, "SEED", "seed of the bootstrap's PCG64 generator"),
    ):
        group.add_argument(
            f"--bootstrap-{name}",
            dest=f"{prefix}bootstrap_{name}",
            type=kind,
            default=default,
            metavar=metavar,
            help=f"{what} {where}",
        )


def endpoint_options(args: argparse.Namespace, prefix: str = "") -> Any:
    """The :class:`EndpointOptions` of the flags :func:`add_endpoint_flags` added."""
    from conceptforge.loaders.harness.endpoint_model import EndpointOptions

    defaults = EndpointOptions()
    concurrency = getattr(args, prefix + "endpoint_concurrency")
    timeout_s = getattr(args, prefix + "endpoint_timeout")
    return EndpointOptions(
        concurrency=defaults.concurrency if concurrency is None else concurrency,
        timeout_s=defaults.timeout_s if timeout_s is None else timeout_s,
        max_requests=getattr(args, prefix + "max_requests", None),
    )


def refuse_endpoint_flags(args: argparse.Namespace, model: str, *, prefix: str = "", flag: str = "--model") -> None:
    """Refuse ``--max-requests`` / ``--endpoint-*`` given with a model that is not served: the
    flags shape the served-model client only, and ignoring them would let a user believe a
    budget held (``--max-requests 10`` with a local model ran every forward)."""
    from conceptforge.endpoint_spec import is_endpoint_spec
    from conceptforge.errors import InvalidArgumentError

    if is_endpoint_spec(model):
        return
    given = [
        name
        for name, dest in (
            ("--max-requests", "max_requests"),
            ("--endpoint-concurrency", "endpoint_concurrency"),
            ("--endpoint-timeout", "endpoint_timeout"),
        )
        if getattr(args, prefix + dest, None) is not None
    ]
    if given:
        raise InvalidArgumentError(
            f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a served model "
            f"({flag} endpoint:NAME@URL or PROVIDER:NAME), not to {model}, which runs here: drop "
            f"{'it' if len(given) == 1 else 'them'}"
        )


def refuse_device_for_endpoint(device: str | None, model: str, *, flag: str = "--device") -> None:
    """Refuse ``--device`` with a served model (the server chose its device), before the device is
    checked: ``--device cuda`` on a laptop scoring a remote vLLM is a flag that does not apply, not
    a missing GPU."""
    from conceptforge.endpoint_spec import is_endpoint_spec
    from conceptforge.errors import InvalidArgumentError

    if device is not None and is_endpoint_spec(model):
        raise InvalidArgumentError(
            f"{flag} {device} does not apply to a served model ({model}): the server runs it on its own device; drop it"
        )
