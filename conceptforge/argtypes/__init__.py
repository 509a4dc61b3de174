"""Argument types that check a flag's value before any work starts.

Why: a value outside its domain (``--epochs 0``, ``--validation-fraction 1.5``, ``--ece-bins 0``)
used to be accepted and then trained on NaN, printed every ECE as 0, or failed after hours. Each
type here is what ``add_argument(type=...)`` takes: it converts the text, checks the domain and
otherwise raises :class:`argparse.ArgumentTypeError`, which the command line prints as one
``error: …`` line (exit 2) before anything is loaded or written.

Each type also knows a few values outside its domain (:meth:`ArgType.bad_examples`) and one inside
(:meth:`ArgType.good_example`), so the test that walks every flag of every sub-command
(tests/core/test_flag_walk.py) exercises a new flag without anyone listing it.

The device check (:func:`check_device`) is shared with library code: a ``--device cuda`` on a
machine without CUDA is one :class:`~conceptforge.errors.DeviceUnavailableError` line whether the
command line or a library caller asked for it.
"""

from __future__ import annotations

from conceptforge.argtypes.base import (
    ArgType,
    Examples,
)
from conceptforge.argtypes.devices import (
    DTYPE_ALIASES,
    DTYPES,
    SHORT_DTYPES,
    DeviceType,
    DType,
    check_device,
    device,
    device_checked_in_run,
    device_name,
    dtype,
)
from conceptforge.argtypes.devices import (
    MaxMemory as MaxMemory,
)
from conceptforge.argtypes.devices import (
    max_memory as max_memory,
)
from conceptforge.argtypes.hub import (
    FunctionRef,
    HubLicense,
    HubRepoId,
    ModelSource,
    hub_license,
    hub_repo_id,
    model_source,
)
from conceptforge.argtypes.numbers import (
    ByteSize,
    FloatRange,
    IntList,
    IntRange,
    Resolution,
    finite_float,
    fraction_above_zero,
    fraction_below_one,
    non_negative_float,
    non_negative_int,
    open_unit_interval,
    port,
    positive_float,
    positive_int,
    rating,
    seconds_measured,
    seed,
    unit_interval,
)
from conceptforge.argtypes.paths import (
    CreatableDir as CreatableDir,
)
from conceptforge.argtypes.paths import (
    PathType,
    RelativeName,
    check_writable,
    existing_dir,
    existing_file,
    existing_location,
    existing_path,
    output_dir,
    output_file,
    output_location,
)
from conceptforge.argtypes.paths import (
    creatable_dir as creatable_dir,
)
from conceptforge.argtypes.paths import (
    dataset_name_problem as dataset_name_problem,
)
from conceptforge.argtypes.paths import (
    name_problem as name_problem,
)
from conceptforge.argtypes.paths import (
    symlink_problem as symlink_problem,
)
from conceptforge.argtypes.paths import (
    url_refused as url_refused,
)
from conceptforge.argtypes.text import (
    Choice,
    ChoiceList,
    Flag,
    ListOf,
    Optional,
    StrList,
    Template,
    Text,
    flag,
)

__all__ = [
    "ArgType",
    "IntRange",
    "FloatRange",
    "PathType",
    "DeviceType",
    "Examples",
    "positive_int",
    "non_negative_int",
    "port",
    "seed",
    "positive_float",
    "seconds_measured",
    "non_negative_float",
    "finite_float",
    "unit_interval",
    "open_unit_interval",
    "fraction_below_one",
    "fraction_above_zero",
    "existing_dir",
    "existing_file",
    "existing_path",
    "output_file",
    "output_dir",
    "output_location",
    "existing_location",
    "rating",
    "device",
    "device_checked_in_run",
    "device_name",
    "check_device",
    "check_writable",
    "ListOf",
    "Resolution",
    "Template",
    "ByteSize",
    "HubLicense",
    "HubRepoId",
    "hub_license",
    "hub_repo_id",
    "Choice",
    "DType",
    "dtype",
    "DTYPES",
    "DTYPE_ALIASES",
    "SHORT_DTYPES",
    "IntList",
    "StrList",
    "Optional",
    "Flag",
    "Text",
    "ChoiceList",
    "ModelSource",
    "FunctionRef",
    "RelativeName",
    "flag",
    "model_source",
]
