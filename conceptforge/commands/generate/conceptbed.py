"""``conceptforge generate conceptbed``: learn ConceptBed concepts with one learner and sample their concept and composition images.

Examples::

    conceptforge generate conceptbed --learner textual-inversion --concepts spec.json --out out/ti
    conceptforge generate conceptbed --spec my-concepts.yaml --out out/mine --dry-run
    conceptforge generate conceptbed --preset conceptbed-paper --concepts spec.json --learner dreambooth --out out/db

``--spec FILE`` (any concepts, docs/conceptbed.md "Your own ConceptBed concepts") and ``--preset NAME``
(a built-in spec) are exclusive; with neither, ``--concepts FILE`` is the paper's run as it always
was. A spec's learner and sampling settings are the defaults: a flag given says otherwise.
"""

from __future__ import annotations

import argparse
from typing import Any

from conceptforge import argtypes as at
from conceptforge import gpu_costs
from conceptforge.commands.base import add_run_options, settings_from_args, shard_of
from conceptforge.commands.shared_flags import add_dataset_out
from conceptforge.generators.conceptbed.learners import DEFAULT_MODEL_ID, LEARNER_PRESETS, LEARNERS, LearnerConfig
from conceptforge.generators.conceptbed.spec import ConceptSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--learner",
        default=None,
        choices=LEARNERS,
        help="none: the base model alone, V* written as the concept's class noun (Table 2's Stable Diffusion row); "
        "required unless the spec's learner.name says it",
    )
    parser.add_argument(
        "--concepts",
        default=None,
        type=at.existing_file,
        help="the paper's JSON concept spec (PACS/ImageNet/CUB roots, selection, captions; see docs/conceptbed.md)",
    )
    parser.add_argument(
        "--spec",
        default=None,
        type=at.existing_file,
        help="a ConceptBed benchmark spec (YAML/JSON): your own concepts, their images, nouns and templates",
    )
    add_dataset_out(parser.add_argument, help="output dataset folder or fsspec URL such as s3://bucket/conceptbed")
    parser.add_argument(
        "--work-dir",
        type=at.output_dir,
        default=None,
        help="local folder for learned concept weights and class images (default OUT/.work; "
        "for a URL OUT, $CONCEPTFORGE_WORK_DIR or ~/.cache/conceptforge/conceptbed-work/<hash of OUT>)",
    )
    parser.add_argument(
        "--model-id",
        default=DEFAULT_MODEL_ID,
        help="diffusers model id or local folder: a Stable Diffusion 1.x pipeline, or an LDMTextToImagePipeline "
        "(e.g. CompVis/ldm-text2im-large-256, Textual Inversion only); read from its model_index.json",
    )
    parser.add_argument("--revision", default=None)
    parser.add_argument(
        "--num-images",
        type=at.non_negative_int,
        default=None,
        help="concept-split images per concept (default: the spec's sampling.num_images; paper: 100)",
    )
    parser.add_argument("--steps", type=at.positive_int, default=None, help="training steps (default: Table 5)")
    parser.add_argument("--learning-rate", type=at.positive_float, default=None, help="default: Table 5")
    parser.add_argument(
        "--placeholder-token", default=None, help="default: Table 5 (<object>, sks, <new1>; * on an LDM)"
    )
    parser.add_argument("--initializer-token", default=None, help="default: the concept's parent word")
    parser.add_argument(
        "--learner-preset",
        dest="preset",
        choices=LEARNER_PRESETS,
        default=None,
        help="paper (default): Table 5 (DreamBooth fine-tunes the whole UNet at lr 5e-6, 400 steps, 200 class "
        "images); lora: the cheaper DreamBooth option, rank-4 LoRA at lr 1e-4 (other learners: Table 5 either way)",
    )
    parser.add_argument(
        "--preset",
        dest="spec_preset",
        default=None,
        metavar="NAME",
        help="a built-in spec (conceptforge spec presets): conceptbed-paper (with --concepts FILE naming your "
        "PACS/ImageNet/CUB folders); 'paper' and 'lora' are the older spellings of --learner-preset",
    )
    parser.add_argument(
        "--dreambooth-mode", choices=("lora", "full"), default=None, help="override the preset's DreamBooth mode"
    )
    parser.add_argument("--lora-rank", type=at.positive_int, default=4)
    parser.add_argument(
        "--num-class-images", type=at.non_negative_int, default=None, help="regularisation images (default 200)"
    )
    parser.add_argument("--prior-loss-weight", type=at.non_negative_float, default=1.0)
    parser.add_argument(
        "--resolution",
        type=at.IntRange(
            8,
            2048,
            name="resolution (8-2048)",
            multiple_of=8,
            why="Stable Diffusion's latents are 1/8 of the image",
            bound_why="Stable Diffusion is trained at 512 to 1024 px",
        ),
        default=None,
        help="train/sample size (default: the model's)",
    )
    parser.add_argument("--train-batch-size", type=at.positive_int, default=1)
    parser.add_argument("--num-inference-steps", type=at.positive_int, default=None, help="default: the spec's, 50")
    parser.add_argument("--guidance-scale", type=at.non_negative_float, default=None, help="default: the spec's, 7.5")
    parser.add_argument(
        "--eta",
        type=at.non_negative_float,
        default=0.0,
        help="DDIM eta when sampling an LDM (default 0); refused with SD (PNDM has none)",
    )
    parser.add_argument(
        "--dtype",
        "--mixed-precision",
        dest="mixed_precision",
        type=at.dtype,
        choices=at.DTYPES,
        default="auto",
        help="training's mixed precision: auto (bfloat16 or float16 on CUDA, float32 on CPU), float32 (none), "
        "float16, bfloat16; --mixed-precision and fp16, bf16, no are the old spellings",
    )
    parser.add_argument("--seed", type=at.seed, default=None, help="default: the spec's, 0")
    parser.add_argument("--categoriser", default="rules", help="'rules' or module:function (caption -> categories)")
    parser.add_argument(
        "--max-captions", type=at.non_negative_int, default=None, help="composite captions per concept (default all)"
    )
    parser.add_argument(
        "--license",
        type=at.hub_license,
        default="creativeml-openrail-m",
        help="dataset card license (a Hub license id)",
    )
    parser.add_argument(
        "--embed-references",
        action="store_true",
        help="embed 3 reference thumbnails per concept (your ImageNet/CUB/PACS images, under their terms; "
        "default: rows name them by id)",
    )
    parser.add_argument(
        "--max-shard-size", type=at.ByteSize(), default="500MB", help="parquet shard size (500MB, 2GiB, bytes)"
    )
    add_run_options(parser, max_items_flag="--max-items", max_items_help="stop after this many new images")
    parser.add_argument("--no-assemble", action="store_true", help="only learn and sample")
    gpu_costs.add_dry_run_arguments(
        parser,
        "print the concepts, steps and images to make and their GPU-hours; run nothing",
        per_step_help="your measured time per training step: overrides the cost table in --dry-run",
        per_image_help="your measured time per sampled image: overrides the cost table in --dry-run",
    )


def _learner_workload(config: LearnerConfig) -> str:
    if config.learner == "dreambooth" and config.dreambooth_mode == "lora":
        return "conceptbed/dreambooth-lora-step"
    return f"conceptbed/{config.learner}-step"


def plan_lines(args: argparse.Namespace, config: LearnerConfig, spec: ConceptSpec | None = None) -> list[str]:
    """What --dry-run prints: per concept the training steps, class images and sampled images,
    then the GPU-hours (cost table scaled to the resolution and steps, or the flags)."""
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import build_items, prepare_captions

    spec = spec or load_spec(args.concepts)
    items = build_items(
        spec, config, prepare_captions(spec, args.categoriser, args.max_captions), num_images=args.num_images
    )
    concepts = len(spec.concepts)
    sampled = sum(len(v) for v in items.values())
    composition = sum(1 for v in items.values() for item in v if item.split == "composition")
    class_images = concepts * int(config.num_class_images or 0) if config.uses_prior else 0
    family = config.family
    resolution = config.resolution or family.plan_resolution  # the model's own size is read only when it loads
    mode = f" ({config.dreambooth_mode})" if config.learner == "dreambooth" else ""
    training = (
        f"{config.steps} steps at lr {config.learning_rate:g}" if config.trains else "the base model, nothing trained"
    )
    lines = concept_plan_lines(spec, items) if spec.benchmark is not None else []
    lines += [
        f"pipeline: {family.pipeline_class}",
        f"learner: {config.learner}{mode}, {training}, {resolution} px"
        + ("" if config.resolution else f" (the paper's {family.title} size; the model's own is used when it loads)"),
        f"concepts: {concepts}",
        f"training steps: {concepts * config.steps:,} ({config.steps} per concept)",
        f"class (prior) images: {class_images:,}"
        + (f" ({config.num_class_images} per concept)" if config.uses_prior else " (no prior preservation)"),
        f"sampled images: {sampled:,} ({sampled - composition:,} concept, {composition:,} composition), "
        f"{config.num_inference_steps} steps, guidance {config.guidance_scale:g}",
    ]
    parts = []
    if config.trains:
        if args.seconds_per_step:
            step = gpu_costs.given(args.seconds_per_step, "training step", "--seconds-per-step")
        else:
            step = gpu_costs.estimate(_learner_workload(config), gpu=args.gpu_model, resolution=resolution)
        parts.append(("train", concepts * config.steps, step))
    if args.seconds_per_image:
        image = gpu_costs.given(args.seconds_per_image, "sampled image", "--seconds-per-image")
    else:
        image = gpu_costs.estimate(
            "conceptbed/sample-image", gpu=args.gpu_model, resolution=resolution, steps=config.num_inference_steps
        )
    if class_images:
        parts.append(("class images", class_images, image))
    parts.append(("sample", sampled, image))
    lines += gpu_costs.plan_lines(parts)
    if not (args.seconds_per_step and args.seconds_per_image):
        lines.append("  (--seconds-per-step / --seconds-per-image override the table with your own measured times)")
    return lines


def concept_plan_lines(spec: ConceptSpec, items: dict[str, list[Any]]) -> list[str]:
    """A user's spec: each concept with its class noun, reference images and images to sample."""
    benchmark = spec.benchmark or {}
    lines = [f"benchmark: {benchmark.get('name')} ({len(spec.concepts)} concepts)"]
    for concept in spec.concepts:
        made = items.get(concept.name, [])
        composition = sum(1 for item in made if item.split == "composition")
        lines.append(
            f"  {concept.name} ({concept.kind}, class noun {concept.parent!r}): "
            f"{len(concept.reference_images)} reference image(s); {len(made) - composition} concept + "
            f"{composition} composition image(s)"
        )
    if spec.composition_templates:
        lines.append("composition templates: " + "; ".join(spec.composition_templates))
    return lines


def model_pipeline(args: argparse.Namespace) -> str:
    """The pipeline family named by the model's own model_index.json. A --dry-run that cannot read
    it (offline, the Hub id not cached) plans for Stable Diffusion and says so."""
    from conceptforge.errors import WeightsUnavailableError
    from conceptforge.generators.conceptbed.pipelines import STABLE_DIFFUSION, detect_family

    try:
        return detect_family(args.model_id, args.revision).name
    except WeightsUnavailableError as error:
        if not args.dry_run:
            raise
        print(f"note: {error}; planning for a Stable Diffusion pipeline")
        return STABLE_DIFFUSION


def learner_config(args: argparse.Namespace) -> LearnerConfig:
    """Every LearnerConfig field from its flag of the same name; the pipeline family from the model's files."""
    precision = "no" if args.mixed_precision == "float32" else at.SHORT_DTYPES[args.mixed_precision]
    return settings_from_args(LearnerConfig, args, pipeline=model_pipeline(args), mixed_precision=precision)


def read_concepts(args: argparse.Namespace) -> ConceptSpec:
    """The run's concepts from --spec, --preset (with --concepts) or --concepts alone (the paper's
    run as it always was), and the spec's settings under the flags not given."""
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.generators.conceptbed import spec_resolution
    from conceptforge.generators.conceptbed.spec import load_spec

    if args.spec_preset in LEARNER_PRESETS:  # the older spelling of --learner-preset
        if args.preset not in (None, args.spec_preset):
            raise InvalidArgumentError(f"--preset {args.spec_preset} and --learner-preset {args.preset} disagree")
        args.preset, args.spec_preset = args.spec_preset, None
    if args.spec is not None and args.spec_preset is not None:
        raise InvalidArgumentError("--spec and --preset are exclusive: give your spec file or a built-in preset")
    if args.spec is not None and args.concepts is not None:
        raise InvalidArgumentError(
            "--concepts is the paper's JSON concept spec; with --spec FILE the concepts are in the spec: drop --concepts"
        )
    if args.spec is None and args.spec_preset is None:
        if args.concepts is None:
            raise InvalidArgumentError("give --spec FILE, --preset NAME or --concepts FILE (docs/conceptbed.md)")
        apply_spec_settings(args, None)
        return load_spec(args.concepts)
    spec_file = spec_resolution.load_conceptbed_spec(args.spec, preset=args.spec_preset)
    if args.spec_preset is not None:
        if args.concepts is not None:
            spec_file = spec_resolution.with_concept_json(spec_file, args.concepts)
        elif not any(vars(spec_file.spec.roots).values()):
            raise InvalidArgumentError(
                f"--preset {args.spec_preset} needs --concepts FILE, the JSON concept spec naming your PACS/ImageNet/"
                "CUB folders (docs/conceptbed.md); or copy the preset, set its roots and give it with --spec"
            )
    concepts = spec_resolution.concept_spec(spec_file)  # the spec's own errors first, then the flags'
    apply_spec_settings(args, spec_file.spec)
    return concepts


#: flag -> (the spec's part, its field): a spec's value is the default of the flag.
SPEC_SETTINGS = {
    "learner": ("learner", "name"),
    "preset": ("learner", "preset"),
    "steps": ("learner", "steps"),
    "learning_rate": ("learner", "learning_rate"),
    "placeholder_token": ("learner", "placeholder_token"),
    "initializer_token": ("learner", "initializer_token"),
    "dreambooth_mode": ("learner", "dreambooth_mode"),
    "num_class_images": ("learner", "num_class_images"),
    "num_images": ("sampling", "num_images"),
    "num_inference_steps": ("sampling", "num_inference_steps"),
    "guidance_scale": ("sampling", "guidance_scale"),
    "resolution": ("sampling", "resolution"),
    "seed": ("sampling", "seed"),
    "max_captions": (None, "max_captions"),
}
#: Without a spec (``--concepts`` alone): the paper's values, as the flags' defaults were.
PAPER_SETTINGS = {"preset": "paper", "num_images": 100, "num_inference_steps": 50, "guidance_scale": 7.5, "seed": 0}


def apply_spec_settings(args: argparse.Namespace, spec: Any) -> None:
    """Each flag not given takes the spec's value, then the paper's; --learner must come from one."""
    from conceptforge.errors import InvalidArgumentError

    for flag, (part, name) in SPEC_SETTINGS.items():
        if getattr(args, flag) is None and spec is not None:
            setattr(args, flag, getattr(getattr(spec, part) if part else spec, name))
        if getattr(args, flag) is None and flag in PAPER_SETTINGS:
            setattr(args, flag, PAPER_SETTINGS[flag])
    if args.learner is None:
        raise InvalidArgumentError(
            f"--learner: give one of {', '.join(LEARNERS)}"
            + (" (or the spec's learner.name)" if spec is not None else "")
        )


def run(args: argparse.Namespace) -> int:
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions

    # a bad spec is told before the model's files are read (maybe from the Hub)
    spec = read_concepts(args)
    if args.num_images < 0:
        raise InvalidArgumentError("--num-images must be >= 0")
    config = learner_config(args)
    if args.dry_run:
        print("\n".join(plan_lines(args, config, spec)))
        return 0
    options = GenerateOptions(
        config=config,
        out=args.out,
        num_images=args.num_images,
        categoriser=args.categoriser,
        max_captions=args.max_captions,
        shard=shard_of(args),
        license=args.license,
        max_shard_size=args.max_shard_size,
        max_items=args.max_items,
        assemble=not args.no_assemble,
        embed_references=args.embed_references,
        work_dir=args.work_dir,
    )
    summary = ConceptBedGenerator(spec, options).run()
    if summary["assembled"]:
        rows = ", ".join(f"{name}={count}" for name, count in summary["splits"].items())
        out = str(args.out).rstrip("/")
        print(f"wrote {out} ({rows}); card {out}/README.md, grid {out}/grid.png")
    print(summary["message"])
    return 0
