"""``conceptforge init METHOD --from SOURCE``: write a starter spec from a dataset.

    conceptforge init sub --from ./my-cars-dataset [--name my-cars] [--out my-cars.yaml] [--force]

SOURCE is what the method's starter reads: a local dataset folder, an ImageFolder,
``ORG/NAME@REVISION`` on the Hub, or for binding a CLEVR ``properties.json``. The method's starter
(``<method package>.starter.starter_spec``) writes YAML whose comments say the classes,
attributes and groups it found, the counts and the defaults it chose; this command checks that
the YAML loads as a spec of the method (a starter that writes a spec its own method refuses would
waste the user's first step), then writes it in one piece and prints the next command.

An existing file is never overwritten without ``--force``: the user has likely edited it.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import tempfile
from pathlib import Path

from conceptforge import argtypes as at
from conceptforge.specs import METHODS

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", choices=METHODS, help="the method the spec is for")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        help="a dataset folder, an ImageFolder, ORG/NAME@REVISION on the Hub, or (binding) a properties.json",
    )
    parser.add_argument("--name", default=None, help="the benchmark's name (default: from the source's name)")
    parser.add_argument(
        "--out", type=at.output_file, default=None, help="the spec file to write (default: NAME.yaml here)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def default_name(source: str) -> str:
    """A benchmark name from the source: the Hub repo's name, or the folder's (a file's parent's)."""
    text = source.strip().rstrip("/")
    if "@" in text and not Path(text).exists():
        text = text.split("@", 1)[0]
    path = Path(text)
    stem = path.parent.name if path.suffix.lower() in (".json", ".yaml", ".yml") else path.name
    slug = re.sub(r"[^a-z0-9]+", "-", (stem or "benchmark").lower()).strip("-")
    return slug or "benchmark"


def check_source(source: str) -> None:
    """A Hub source is ``ORG/NAME@REVISION``; anything else must be a local file or folder.

    Why here, before the method's starter: a typo in a path must not be taken for a Hub id (and
    a Hub id without its revision would make a benchmark whose data can change under it)."""
    from conceptforge.errors import DataNotFoundError, InvalidArgumentError
    from conceptforge.hub_ids import repo_id_problem

    text = source.strip()
    if not text:
        raise InvalidArgumentError("--from: is empty; give a dataset folder, ORG/NAME@REVISION or a properties.json")
    if Path(text).expanduser().exists():
        return
    repo, _, revision = text.partition("@")
    if revision and not repo_id_problem(repo):
        return
    if not revision and not repo_id_problem(text) and not text.startswith((".", "/", "~")):
        raise InvalidArgumentError(
            f"--from: {text} is neither a local path nor pinned: a Hub dataset needs its revision, "
            f"e.g. --from {text}@v1.0.0 (a tag or commit)"
        )
    raise DataNotFoundError(
        f"--from: no such file or folder {text!r}; give a dataset folder, an ImageFolder, "
        "ORG/NAME@REVISION on the Hub or (binding) a properties.json"
    )


def _source_for(source: str, out_dir: Path) -> str:
    """The source as the spec should name it: a spec's paths resolve against its own folder, so a
    local source stays relative only when the spec is written in the working folder."""
    path = Path(source).expanduser()
    if not path.exists() or path.is_absolute() or out_dir.resolve() == Path.cwd().resolve():
        return source
    return str(path.resolve())


def run(args: argparse.Namespace) -> int:
    from conceptforge.commands.spec_methods import RUN_COMMANDS, spec_class, starter
    from conceptforge.errors import InvalidArgumentError, SpecError
    from conceptforge.serialization import atomic_write_bytes
    from conceptforge.specs import load_benchmark_spec

    check_source(args.source)
    name = (args.name if args.name is not None else default_name(args.source)).strip()
    if not name:
        raise InvalidArgumentError("--name: is empty; give the benchmark's name, e.g. --name my-cars")
    out = Path(args.out) if args.out is not None else Path(f"{default_name(name)}.yaml")
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise InvalidArgumentError(f"--out: {out} must end in .yaml or .yml (a starter spec is YAML with comments)")
    if out.exists() and not args.force:
        raise InvalidArgumentError(f"--out: {out} exists; give another --out, or --force to overwrite it")
    if out.is_dir():
        raise InvalidArgumentError(f"--out: {out} is a folder; give a file name ending in .yaml")
    out_dir = out.parent if str(out.parent) else Path(".")
    if not out_dir.is_dir():
        raise InvalidArgumentError(f"--out: folder {out_dir} does not exist; create it or give another --out")
    cls, make = spec_class(args.method), starter(args.method)
    text = make(_source_for(args.source, out_dir), name=name)
    # Validate where it will live (relative paths resolve against the spec's folder), then place it.
    fd, probe = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".yaml", dir=out_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        loaded = load_benchmark_spec(probe, method=args.method, spec_cls=cls)
    except SpecError as error:
        raise SpecError(
            f"the {args.method} starter wrote a spec that does not load ({error}); please report it"
        ) from None
    finally:
        Path(probe).unlink(missing_ok=True)
    atomic_write_bytes(out, text.encode("utf-8"))
    logger.info("wrote %s (%s spec %r, sha256 %s)", out, args.method, loaded.name, loaded.sha256[:12])
    print(f"wrote {out}: a {args.method} spec {loaded.name!r} from {args.source}; read its comments, edit, then:")
    print(f"  conceptforge spec check {out}")
    print(f"  {RUN_COMMANDS[args.method]} --spec {out} --dry-run")
    return 0
