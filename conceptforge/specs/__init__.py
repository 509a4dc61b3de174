"""Benchmark specs: one declarative, versioned, validated file per benchmark, for each method.

A spec file (YAML or JSON) names its ``method`` (``sub``, ``conceptbed``, ``binding``,
``compmap``) and the ``spec_version`` it was written for; everything else is the method's own
fields, declared as a dataclass in the method's package and validated by pydantic, so a bad field
is one line naming its path (``attributes[3].group: unknown group 'colour'``) before any work.
The four papers' benchmarks ship as presets (``conceptforge/specs/presets/*.yaml``) and the JSON
Schema of each method ships in ``conceptforge/specs/schemas/`` for editors.
"""

from conceptforge.specs.files import read_spec_file
from conceptforge.specs.loading import METHODS, SPEC_VERSION, BenchmarkSpecFile, load_benchmark_spec
from conceptforge.specs.presets import preset_names, preset_path
from conceptforge.specs.sources import DatasetSource, open_source
from conceptforge.specs.validation import SpecFieldError, check_exactly_one, parse_fields, spec_error

__all__ = [
    "METHODS",
    "BenchmarkSpecFile",
    "SPEC_VERSION",
    "DatasetSource",
    "SpecFieldError",
    "check_exactly_one",
    "load_benchmark_spec",
    "open_source",
    "parse_fields",
    "preset_names",
    "preset_path",
    "read_spec_file",
    "spec_error",
]
