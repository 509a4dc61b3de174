"""The SUB spec's JSON Schema ships as the code derives it, and the paper preset says the paper."""

from __future__ import annotations

import json

import yaml

from conceptforge.generators.sub.benchmark import SubBenchmarkSpec
from conceptforge.generators.sub.spec import load_spec
from conceptforge.specs import preset_names, preset_path
from conceptforge.specs.schema import schema_text, shipped_schema_path
from tests.specs.sub_synthetic import mug_spec_text


def test_shipped_schema_is_the_derived_one():
    assert shipped_schema_path("sub").read_text() == schema_text("sub", SubBenchmarkSpec)


def test_editors_schema_accepts_the_preset_and_a_user_spec_and_names_a_typo():
    import jsonschema

    schema = json.loads(shipped_schema_path("sub").read_text())
    jsonschema.validate(yaml.safe_load(preset_path("sub-cub-paper").read_text()), schema)
    jsonschema.validate(yaml.safe_load(mug_spec_text()), schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(mug_spec_text() + "colours: 1\n")))
    assert any("colours" in error.message for error in errors)


def test_paper_preset_holds_the_paper_numbers():
    """App. A: 33 reference birds; App. C: 32 substitutions; Table 3: five guidance birds; Sec. 5:
    k = 10, tmin = 0.2, tmax = 0.6 (pattern) / 0.9 (colour, shape); Sec. 4.2: the majority vote."""
    assert "sub-cub-paper" in preset_names("sub")
    spec = load_spec()
    assert len(spec.reference_birds) == 33 and len(spec.substitutions) == 32
    assert spec.guidance_birds["has_bill_shape::needle"] == "Hummingbird" and len(spec.guidance_birds) == 5
    assert (spec.tdg_params["pattern"].tmax, spec.tdg_params["colour"].tmax, spec.tdg_params["shape"].k) == (
        0.6,
        0.9,
        10.0,
    )
    assert spec.class_percent == 50.0 and spec.colour_guidance_bird == "bird" and spec.cub
