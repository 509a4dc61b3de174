"""A CompMap task run from a benchmark spec: which data, vocabulary and templates it reads.

The tasks (``tasks.py``) run the paper's data when no spec is given (``--cub-dir``,
``--mit-states-dir``) and a spec's data otherwise (``--compmap-spec``, ``evaluate compmap
--spec``); this module is the spec side, so the task table stays one table.
"""

from __future__ import annotations

from typing import Any

from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.harness.task import TaskContext


def spec_of(ctx: TaskContext) -> Any:
    """The run's CompMap spec (``--compmap-spec`` / ``evaluate compmap --spec``), None: the paper's data."""
    if not ctx.compmap_spec:
        return None
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec

    return load_compmap_spec(ctx.compmap_spec)


def spec_variant(spec: Any) -> str:
    return f", benchmark spec {spec.file.name}" if spec is not None else ""


def spec_details(spec: Any) -> dict[str, Any]:
    """What a spec run's entry says about its benchmark: the spec as validated (its file's
    mapping) and its fingerprint, so the results file tells what was evaluated without the file."""
    if spec is None:
        return {}
    return {"benchmark_spec": {"name": spec.file.name, "sha256": spec.file.sha256, "spec": spec.file.raw}}


def few_shot_inputs(ctx: TaskContext, spec: Any) -> tuple[Any, Any, list[Any], list[str], Any]:
    """(data, concept vocabulary, images the model reads, their cache keys, templates) of an
    n-way k-shot run: CUB (``--cub-dir`` or a spec's ``cub``) or a spec's class x attribute table."""
    from conceptforge.loaders.compmap.cub_arrays import cub_primitives
    from conceptforge.loaders.compmap.pipeline import cub_vocabulary, table_vocabulary
    from conceptforge.loaders.compmap.prompts import parse_templates, with_own_template
    from conceptforge.loaders.compmap.spec_data import few_shot_table_data

    templates = parse_templates(ctx.options["templates"])
    if spec is None:
        data = cub_primitives(ctx.cub_dir)
        images = [str(p) for p in data.image_paths]
        return data, cub_vocabulary(data, templates), images, images, templates
    few = spec.spec.few_shot
    templates = with_own_template(templates, few.template)
    if few.cub is not None:
        from conceptforge.cub import readable_attribute

        folder = str(spec.resolve(few.cub.folder)) if few.cub.folder else ctx.cub_dir
        if folder is None:
            raise InvalidArgumentError(
                "few_shot.cub.folder: the spec names no CUB folder; add 'folder: PATH' or pass it"
            )
        data = cub_primitives(folder)
        images = [str(p) for p in data.image_paths]
        readable = [readable_attribute(name) for name in data.attributes]
        vocab = table_vocabulary(data.attributes, readable, data.groups, templates, phrase=few.attribute_phrase)
        return data, vocab, images, images, templates
    data = few_shot_table_data(spec)
    readable = [data.readable(i) for i in range(len(data.attributes))]
    vocab = table_vocabulary(data.attributes, readable, data.groups, templates, phrase=few.attribute_phrase)
    return data, vocab, data.images, data.image_keys, templates


def czsl_inputs(ctx: TaskContext, spec: Any) -> tuple[Any, Any]:
    """(data, templates) of a CZSL run: MIT-States (``--mit-states-dir``) or a spec's pair data."""
    from conceptforge.loaders.compmap.mit_states import load_mit_states
    from conceptforge.loaders.compmap.prompts import parse_templates, with_own_template
    from conceptforge.loaders.compmap.spec_data import czsl_data

    options = ctx.options
    templates = parse_templates(options["templates"])
    if spec is None:
        data = load_mit_states(ctx.mit_states_dir, split_dir=options["split_dir"], metadata=options["metadata"] or None)
        return data, templates
    return czsl_data(spec, folder=ctx.mit_states_dir), with_own_template(templates, spec.spec.czsl.template)


def check_spec_input(task: str, inputs: dict[str, Any]) -> None:
    """Before any model loads: a run's CompMap spec is valid, runs ``task``'s protocol, and its
    data is named (by the spec, or by the folder flag when the spec leaves it out)."""
    if not inputs.get("compmap_spec"):
        return
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec

    spec = load_compmap_spec(inputs["compmap_spec"])
    if spec.spec.task != task:
        protocol = "czsl" if spec.spec.czsl is not None else "few_shot"
        raise InvalidArgumentError(
            f"{task}: the spec {inputs['compmap_spec']} is a {protocol} spec, run by task {spec.spec.task}; "
            f"select {spec.spec.task}"
        )
    folder = "cub_dir" if task == "compmap-cub" else "mit_states_dir"
    if not spec.spec.names_its_data and not inputs.get(folder):
        layout = "few_shot.cub" if task == "compmap-cub" else "czsl.mit_states"
        raise InvalidArgumentError(
            f"{task}: the spec {inputs['compmap_spec']} names no data folder; add {layout}.folder or pass "
            f"--{folder.replace('_', '-')}"
        )
