"""The spec a release carries: ``benchmark_spec.yaml`` in the dataset directory.

Why: a benchmark made from a researcher's spec must say what it is without the code or the spec
file that made it — the evaluation reads its class and attribute names from it, ``verify``
rebuilds from it, a reader sees the rules that were applied. What is written is the spec as
validated and normalised: every default filled in, the envelope first. A paper preset's release
carries none (its files stay byte-identical to before specs existed).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from conceptforge.errors import DataFormatError
from conceptforge.specs.loading import BenchmarkSpecFile
from conceptforge.specs.validation import _adapter

BENCHMARK_SPEC_NAME = "benchmark_spec.yaml"


def normalised_spec(spec_file: BenchmarkSpecFile) -> dict[str, Any]:
    """The envelope and the method's fields as validated (defaults filled in), plain data."""
    fields = _adapter(type(spec_file.spec)).dump_python(spec_file.spec, mode="json")
    envelope = {"method": spec_file.method, "spec_version": spec_file.spec_version, "name": spec_file.name}
    if spec_file.description:
        envelope["description"] = spec_file.description
    return {**envelope, **fields}


def release_spec_text(spec_file: BenchmarkSpecFile) -> str:
    """``benchmark_spec.yaml``'s text: the normalised spec with a header saying what it is."""
    header = (
        f"# The spec this {spec_file.method} benchmark was made from, as validated (defaults filled in).\n"
        f"# Load it with conceptforge.specs.load_benchmark_spec(path, method={spec_file.method!r}, spec_cls=...).\n"
    )
    body = yaml.safe_dump(normalised_spec(spec_file), sort_keys=False, allow_unicode=True, width=110)
    return header + body


def write_release_spec(directory: str | Path, text: str) -> Path:
    path = Path(directory) / BENCHMARK_SPEC_NAME
    path.write_text(text, encoding="utf-8")
    return path


def read_release_spec(directory: str | Path) -> dict[str, Any] | None:
    """The mapping of a release's ``benchmark_spec.yaml``, or ``None`` when it has none (a paper preset)."""
    path = Path(directory) / BENCHMARK_SPEC_NAME
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise DataFormatError(f"{path}: cannot be read ({type(error).__name__}); the release is damaged") from None
    if not isinstance(data, dict):
        raise DataFormatError(f"{path}: holds no mapping of fields; the release is damaged")
    return data


@lru_cache(maxsize=32)
def release_spec_at(repo: str, revision: str | None = None) -> dict[str, Any] | None:
    """The ``benchmark_spec.yaml`` of a release: a local dataset folder, or a Hub dataset at
    ``revision``; ``None`` when it carries none (a paper preset's release, the authors' SUB)."""
    local = Path(repo).expanduser()
    if local.is_dir():
        return read_release_spec(local)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError

    try:
        path = hf_hub_download(repo, BENCHMARK_SPEC_NAME, repo_type="dataset", revision=revision)
    except EntryNotFoundError:
        return None
    except (RepositoryNotFoundError, HfHubHTTPError, OSError, ValueError):
        return None  # the dataset itself is resolved (and its errors said) by the caller
    return read_release_spec(Path(path).parent)
