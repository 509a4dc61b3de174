"""The task registry of ``conceptforge evaluate --tasks …``: one entry per (benchmark, protocol).

Why a registry: a user names tasks (``sub-vlm,binding-clip,…``) the way lm-evaluation-harness
names its tasks, and every task carries what reproducing its number needs: the dataset repo, its
config/split and pinned revision, the model kinds it accepts, the protocol and variant names, and
the function that runs it on the shared model session. Protocol code stays in the benchmark
modules (``sub``, ``binding``, ``compmap``, ``conceptbed``); here it is only called.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.model_ref import CBM, CLIP, GENERATED, ITM, ModelRef

logger = logging.getLogger(__name__)

# Where our releases are published (publish.py --repo-id); override per task with --dataset.
DEFAULT_ORG = "conceptforge"


@dataclass(frozen=True)
class Option:
    """A protocol setting a user may change with ``--task-option TASK.NAME=VALUE``."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise InvalidArgumentError(f"expected comma-separated integers, got {text!r}") from None


def str_list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in str(text).split(",") if v.strip())


@dataclass(frozen=True)
class DatasetRef:
    """The data a task ran on: ``repo`` (Hub id or local path), requested ``revision``, the
    ``sha`` it resolved to (commit, or ``local-…`` fingerprint), ``config`` and ``split``."""

    repo: str
    revision: str | None
    sha: str | None
    source: str  # hub | local
    config: str | None = None
    split: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def load_revision(self) -> str | None:
        """What to pass to ``load_dataset``: the resolved commit, so data and record agree."""
        return self.sha if self.source == "hub" else None


@dataclass
class Metric:
    """A number in [0, 1] (accuracies) or signed (CCD, Δ), with its standard error over seeds or
    episodes where the protocol has them (``None`` for a single deterministic pass)."""

    value: float
    stderr: float | None = None
    n: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskOutcome:
    metrics: dict[str, Metric]
    main_metric: str
    seeds: list[int] = field(default_factory=list)
    variant: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    table: str = ""


@dataclass
class TaskContext:
    """Everything a task's run function gets: the model (``session``), its resolved dataset,
    its options and the run's shared settings."""

    model: ModelRef
    session: Any  # conceptforge.loaders.eval_run.ModelSession
    dataset: DatasetRef
    options: dict[str, Any]
    batch_size: int
    device: str | None
    cub_dir: str | None = None
    concepts: str | None = None
    mit_states_dir: str | None = None


@dataclass(frozen=True)
class Task:
    name: str
    benchmark: str
    description: str
    model_kinds: tuple[str, ...]
    protocol: str
    run: Callable[[TaskContext], TaskOutcome]
    dataset: str | None = None  # default Hub repo (None: the data is a local folder the user passes)
    revision: str | None = None
    config: str | None = None
    split: str | None = None
    needs: tuple[str, ...] = ()  # run-level inputs: "cub_dir", "mit_states_dir", "concepts"
    options: tuple[Option, ...] = ()
    seeded: bool = False  # metrics carry standard errors over seeds/episodes

    def option_defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def skip_reason(self, model: ModelRef, provided: dict[str, Any]) -> str | None:
        """One line saying why this task cannot run with ``model`` (None: it can)."""
        if model.kind not in self.model_kinds:
            what = f"a {model.kind} model" + (f" ({model.model_type})" if model.model_type else "")
            return f"{self.name} needs a {' or '.join(self.model_kinds)} model; {model.id} is {what}"
        missing = [need for need in self.needs if not provided.get(need)]
        if missing:
            return f"{self.name} needs --{missing[0].replace('_', '-')}"
        return None


# ----------------------------------------------------------------------------------- runs
def _pct_metric(mean_se: tuple[float, float], n_runs: int) -> Metric:
    mean, se = mean_se
    return Metric(float(mean), float(se) if n_runs > 1 else None, n_runs if n_runs > 1 else None)


def _load_cub(ctx: TaskContext, need: str = "votes"):
    from conceptforge.cub import load_cub

    return load_cub(ctx.cub_dir, need=need)


def run_sub_vlm(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.sub import evaluate_vlm, load_sub

    cub = _load_cub(ctx)
    items = load_sub(ctx.dataset.repo, split=ctx.dataset.split or "test", revision=ctx.dataset.load_revision, cub=cub)
    if not items:
        raise DataFormatError(f"split {ctx.dataset.split!r} of {ctx.dataset.repo} is empty")
    report = evaluate_vlm(ctx.session.embedder(), items, cub=cub, batch_size=ctx.batch_size,
                          template=ctx.options["template"], none_prompt=ctx.options["none_prompt"],
                          s_minus=ctx.options["s_minus"], cbm_min_classes=ctx.options["cbm_min_classes"])
    s = report.summary
    metrics = {
        "s_plus": Metric(float(s["s_plus"]), None, int(s["n_s_plus"])),
        "s_minus": Metric(float(s["s_minus"]), None, int(s["n_s_minus"])),
        "chance_s_plus": Metric(float(s["chance_s_plus"]), None, int(s["n_s_plus"])),
        "chance_s_minus": Metric(float(s["chance_s_minus"]), None, int(s["n_s_minus"])),
    }
    details = {"per_attribute": report.per_attribute, "per_bird": report.per_bird, "settings": report.settings}
    return TaskOutcome(metrics, "s_plus", variant=f"within-group + none; S- rule {ctx.options['s_minus']}", details=details,
                       table=report.format())


def run_sub_cbm(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.sub import evaluate_cbm, load_cbm_factory, load_sub

    cub = _load_cub(ctx)
    items = load_sub(ctx.dataset.repo, split=ctx.dataset.split or "test", revision=ctx.dataset.load_revision, cub=cub)
    made = load_cbm_factory(ctx.model.id)
    model, transform = made if isinstance(made, tuple) else (made, getattr(made, "transform", None))
    names = None
    if ctx.options["concept_names"]:
        path = Path(ctx.options["concept_names"])
        if not path.is_file():
            raise DataNotFoundError(f"concept_names file {path} does not exist")
        names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    report = evaluate_cbm(model, items, cub=cub, concept_names=names, transform=transform, outputs=ctx.options["outputs"],
                          threshold=ctx.options["threshold"], name=ctx.model.id, batch_size=ctx.batch_size,
                          device=ctx.device or "cpu", s_minus=ctx.options["s_minus"],
                          cbm_min_classes=ctx.options["cbm_min_classes"])
    s = report.summary
    metrics = {"s_plus": Metric(float(s["s_plus"]), None, int(s["n_s_plus"])),
               "s_minus": Metric(float(s["s_minus"]), None, int(s["n_s_minus"]))}
    return TaskOutcome(metrics, "s_plus", variant=f"{ctx.options['outputs']} >= {ctx.options['threshold']}; S- rule {ctx.options['s_minus']}",
                       details={"per_attribute": report.per_attribute, "settings": report.settings},
                       table=report.format())


def _binding_splits(ctx: TaskContext, task: str):
    from conceptforge.loaders.binding.data import load_binding, resolve_config

    try:
        config = resolve_config(ctx.dataset.repo, ctx.options["config"], revision=ctx.dataset.load_revision)
    except DataNotFoundError as error:
        raise DataNotFoundError(f"{error} with --task-option {task}.config=NAME") from None
    return load_binding(ctx.dataset.repo, revision=ctx.dataset.load_revision, config=config)


def run_binding_clip(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.binding.evaluate import BindingReport, evaluate_clip_zero_shot

    splits = _binding_splits(ctx, "binding-clip")
    embedder = ctx.session.embedder()
    summary = evaluate_clip_zero_shot(embedder, splits, template=ctx.options["template"])
    metrics = {f"{split}_accuracy": _pct_metric(value, 1) for split, value in summary.accuracy.items()}
    setting = splits["train"].setting if len(splits.get("train", [])) else next(iter(splits.values())).setting
    report = BindingReport(ctx.dataset.repo, setting, embedder.model_id, embedder.revision, [summary])
    return TaskOutcome(metrics, "gen_accuracy", variant=f"zero-shot, {setting}",
                       details={"setting": setting, "error_breakdown": summary.breakdown, "kinds": summary.kinds,
                                "template": ctx.options["template"]},
                       table=report.format())


def run_binding_cdsm(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.binding.evaluate import evaluate_binding
    from conceptforge.loaders.binding.train import TrainConfig

    models = list(ctx.options["models"])
    seeds = list(ctx.options["seeds"])
    if not models or "clip" in models:
        raise InvalidArgumentError("binding-cdsm.models: list trained models (csp, add, mult, conv, tl, rf, clip-ft); zero-shot CLIP is task binding-clip")
    if not seeds:
        raise InvalidArgumentError("binding-cdsm.seeds needs at least one seed")
    config = TrainConfig(epochs=ctx.options["epochs"], batch_size=ctx.batch_size, cdsm_score=ctx.options["cdsm_score"])
    report = evaluate_binding(_binding_splits(ctx, "binding-cdsm"), models=models, embedding_model=ctx.session.embedder(), seeds=seeds,
                              config=config)
    metrics: dict[str, Metric] = {}
    for summary in report.models:
        for split, value in summary.accuracy.items():
            metrics[f"{summary.model}.{split}_accuracy"] = _pct_metric(value, len(summary.runs))
    return TaskOutcome(metrics, f"{models[0]}.gen_accuracy", seeds=seeds,
                       variant=f"{','.join(models)} on frozen image embeddings, {report.setting}, CDSM score "
                               f"{ctx.options['cdsm_score']}, epoch chosen on val",
                       details={"setting": report.setting, "settings": report.settings,
                                "error_breakdown": {m.model: m.breakdown for m in report.models}},
                       table=report.format())


def run_compmap_cub(ctx: TaskContext) -> TaskOutcome:
    import torch

    from conceptforge.loaders.compmap.cub_arrays import cub_primitives
    from conceptforge.loaders.compmap.logreg import LogRegConfig
    from conceptforge.loaders.compmap.pipeline import activation_key, cached_tensor, cub_vocabulary
    from conceptforge.loaders.compmap.prompts import parse_templates
    from conceptforge.loaders.compmap.protocols import CubProtocol, evaluate_cub
    from conceptforge.loaders.compmap.report import cub_tables

    options = ctx.options
    templates = parse_templates(options["templates"])
    data = cub_primitives(ctx.cub_dir)
    vocab = cub_vocabulary(data, templates)
    model = ctx.session.vl_model()
    images = [str(p) for p in data.image_paths]
    group_softmax = bool(options["group_softmax"])
    pred = cached_tensor(ctx.session.activation_cache_dir(), activation_key(model, vocab, images, apply_group_softmax=group_softmax),
                         lambda: model.activations(images, vocab, apply_group_softmax=group_softmax, batch_size=ctx.batch_size))
    protocol = CubProtocol(ways=tuple(options["ways"]), shots=tuple(options["shots"]), n_query=options["queries"],
                           n_episodes=options["episodes"], seed=options["seed"], full_shot=bool(options["full_shot"]),
                           logreg=LogRegConfig(C=options["C"]), protocol=options["protocol"])
    results = evaluate_cub(pred, torch.as_tensor(data.gt_primitives()), data.labels, data.is_train, data.class_attributes(),
                           protocol, groups=data.groups)
    metrics: dict[str, Metric] = {}
    for name, setting in results["settings"].items():
        for row in ("prim", "oracle", "interv_full"):
            cell = setting[row]
            episodes = cell.get("episodes")
            stderr = cell["std"] / episodes ** 0.5 / 100 if episodes and episodes > 1 else None
            metrics[f"{name}.{row}"] = Metric(cell["accuracy"] / 100, stderr, episodes)
        metrics[f"{name}.delta"] = Metric(results["interpretability"][name]["delta"] / 100)
    first = next(iter(results["settings"]))
    return TaskOutcome(metrics, f"{first}.prim", seeds=[options["seed"]],
                       variant=f"{options['protocol']} protocol, templates={templates.name}, "
                               f"group softmax={'on' if group_softmax else 'off'}",
                       details={"results": results}, table=cub_tables(results, model.name))


def run_compmap_mit_states(ctx: TaskContext) -> TaskOutcome:
    import torch

    from conceptforge.loaders.compmap.contrastive import ContrastiveConfig
    from conceptforge.loaders.compmap.mit_states import SPLITS, load_mit_states
    from conceptforge.loaders.compmap.pipeline import activation_key, cached_tensor, mit_vocabulary, text_targets
    from conceptforge.loaders.compmap.prompts import parse_templates
    from conceptforge.loaders.compmap.protocols import MitProtocol, evaluate_mit_states
    from conceptforge.loaders.compmap.report import mit_tables

    options = ctx.options
    templates = parse_templates(options["templates"])
    data = load_mit_states(ctx.mit_states_dir, split_dir=options["split_dir"], metadata=options["metadata"] or None)
    vocab = mit_vocabulary(data, templates)
    model = ctx.session.vl_model()
    group_softmax = bool(options["group_softmax"])
    pred = {}
    for split in SPLITS:
        images = [str(sample.path) for sample in data.samples[split]]
        pred[split] = cached_tensor(
            ctx.session.activation_cache_dir(), activation_key(model, vocab, images, apply_group_softmax=group_softmax),
            lambda images=images: model.activations(images, vocab, apply_group_softmax=group_softmax, batch_size=ctx.batch_size))
    if options["targets"] == "primitives":
        def pair_targets(pairs):
            return torch.as_tensor(data.pair_primitives(list(pairs)))
    else:
        embedder = model.embedder
        if embedder is None:  # an ITM model: pair texts are embedded by a dual encoder
            from conceptforge.loaders.embeddings import EmbeddingModel

            embedder = EmbeddingModel.from_pretrained(options["target_model"], cache_dir=ctx.session.cache_dir, device=ctx.device)
        pair_targets = text_targets(embedder, templates)
    worlds = ("closed", "open") if options["world"] == "both" else (options["world"],)
    protocol = MitProtocol(worlds, (1,), ContrastiveConfig(dim=options["dim"], epochs=options["epochs"], lr=options["lr"],
                                                           seed=options["seed"]), czsl_curve=options["czsl_curve"])
    results = evaluate_mit_states(data, pred, pair_targets, protocol)
    metrics: dict[str, Metric] = {}
    n_test = len(data.samples["test"])
    for world in worlds:
        for row, cell in results["worlds"][world]["test"].items():
            for key in ("auc", "best_seen", "best_unseen", "best_hm", "best_gm"):
                metrics[f"{world}.{row}.{key}"] = Metric(cell["top1"][key] / 100, None, n_test)
        for key, delta in results["interpretability"][world].items():
            metrics[f"{world}.delta.{key}"] = Metric(delta / 100)
    return TaskOutcome(metrics, f"{worlds[0]}.prim.auc", seeds=[options["seed"]],
                       variant=f"test split, top-1, {options['czsl_curve']} CZSL curve, targets={options['targets']}, "
                               f"templates={templates.name}, group softmax={'on' if group_softmax else 'off'}",
                       details={"results": results}, table=mit_tables(results, model.name))


def run_conceptbed_ccd(ctx: TaskContext) -> TaskOutcome:
    from datasets import load_dataset

    from conceptforge.filters.conceptbed_scoring import OracleSet, score_generated, score_real
    from conceptforge.generators.conceptbed.generate import prepare_captions
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.loaders.conceptbed import ORIGINAL, evaluate, report

    options = ctx.options
    vqa = options["vqa_model"] if options["vqa_model"] not in ("", "none") else None
    oracles = OracleSet({"style": options["style_oracle"], "object": options["object_oracle"], "cub": options["cub_oracle"]},
                        vqa_model=vqa, device=ctx.device)
    use_vqa = vqa is not None
    revision = ctx.model.sha if ctx.model.source == "hub" else None
    generated = load_dataset(ctx.model.id, revision=revision)
    kinds = {k for split in generated.values() for k in split.unique("concept_kind")}
    records = score_generated(generated, oracles, batch_size=ctx.batch_size, use_vqa=use_vqa)
    spec = load_spec(ctx.concepts)
    records += score_real(spec, prepare_captions(spec, "rules", None), oracles, batch_size=ctx.batch_size, kinds=kinds,
                          use_vqa=use_vqa)
    results = evaluate(records)
    metrics: dict[str, Metric] = {}
    sources = sorted({key[0] for key in results if key[0] != ORIGINAL})
    for (source, task, category), values in sorted(results.items()):
        if source == ORIGINAL or category:
            continue
        prefix = f"{source}." if len(sources) > 1 else ""
        metrics[f"{prefix}{task}.ccd"] = Metric(values.ccd, None, values.n)
        for name in ("ccd_pooled", "ccd_category_mean"):  # the authors' aggregations, by name
            value = getattr(values, name, float("nan"))
            if value == value:
                metrics[f"{prefix}{task}.{name}"] = Metric(value, None, values.n)
        metrics[f"{prefix}{task}.accuracy"] = Metric(values.accuracy, None, values.n)
    if not metrics:
        raise DataFormatError(f"{ctx.model.id} holds no generated images the oracles could score")
    main = next(name for name in metrics if name.endswith(".ccd"))
    return TaskOutcome(metrics, main, variant=f"oracles={options['style_oracle']},{options['object_oracle']},{options['cub_oracle']}",
                       table=report(records))


# ----------------------------------------------------------------------------------- registry
def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise InvalidArgumentError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text

    return parse


def _s_minus_options() -> tuple[Option, ...]:
    from conceptforge.cub import CBM_MIN_CLASS_COUNT
    from conceptforge.loaders.sub import S_MINUS_RULES

    return (Option("s_minus", S_MINUS_RULES[0], _choice(S_MINUS_RULES), f"S- rule: {' | '.join(S_MINUS_RULES)}"),
            Option("cbm_min_classes", CBM_MIN_CLASS_COUNT, int, "classes an attribute needs to be in the CBM subset (paper rule)"))


def _sub_vlm_options() -> tuple[Option, ...]:
    from conceptforge.loaders.sub import ATTRIBUTE_TEMPLATE, NONE_TEMPLATE

    return (Option("template", ATTRIBUTE_TEMPLATE, str, "attribute prompt with {group} and {value}"),
            Option("none_prompt", NONE_TEMPLATE, str, "prompt of the 'none' option"), *_s_minus_options())


def _binding_config_option() -> Option:
    return Option("config", "single-object", str,
                  "config of the binding repo: single-object | two-object | relational (a one-config repo: its config)")


def _cdsm_score_option() -> Option:
    from conceptforge.loaders.binding.models import CDSM_SCORES

    return Option("cdsm_score", CDSM_SCORES[0], _choice(CDSM_SCORES), f"CDSM scoring: {' | '.join(CDSM_SCORES)}")


def _cub_protocol_option() -> Option:
    from conceptforge.loaders.compmap.protocols import CUB_PROTOCOLS

    return Option("protocol", CUB_PROTOCOLS[0], _choice(CUB_PROTOCOLS),
                  f"{' | '.join(CUB_PROTOCOLS)} (authors: every test image of the n classes is a query)")


def _flag(text: str) -> bool:
    if str(text).lower() in ("1", "true", "yes", "on"):
        return True
    if str(text).lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError(f"expected true/false, got {text!r}")


def _registry() -> dict[str, Task]:
    tasks = [
        Task("sub-vlm", "sub", "SUB S+/S- accuracy of a VLM over CUB's within-group attribute prompts + none (SUB paper Table 1)",
             (CLIP,), "sub/vlm-within-group", run_sub_vlm, dataset="Jessica-bader/SUB", revision="main", split="test",
             needs=("cub_dir",), options=_sub_vlm_options()),
        Task("sub-cbm", "sub", "SUB S+/S- accuracy of a concept-bottleneck model (SUB paper Table 2)",
             (CBM,), "sub/cbm-threshold", run_sub_cbm, dataset="Jessica-bader/SUB", revision="main", split="test",
             needs=("cub_dir",),
             options=(Option("threshold", 0.5, float, "present when sigmoid(logit) >= threshold"),
                      Option("outputs", "logits", str, "logits | probabilities"),
                      Option("concept_names", "", str, "file with the CBM's output attributes, one per line"),
                      *_s_minus_options())),
        Task("binding-clip", "binding", "concept binding: frozen CLIP zero-shot accuracy over the 5 candidates (Binding paper Table 1)",
             (CLIP,), "binding/zero-shot", run_binding_clip, dataset=f"{DEFAULT_ORG}/binding", revision="v1.0.0",
             split="train,val,gen", options=(Option("template", "a photo of {label}", str, "prompt with {label}"), _binding_config_option())),
        Task("binding-cdsm", "binding", "concept binding: CDSMs trained on frozen CLIP image embeddings, mean ± s.e. over seeds "
             "(Binding paper Tables 1-3)", (CLIP,), "binding/cdsm-frozen", run_binding_cdsm,
             dataset=f"{DEFAULT_ORG}/binding", revision="v1.0.0", split="train,val,gen", seeded=True,
             options=(_binding_config_option(), Option("models", ("csp", "add", "mult", "conv", "tl", "rf"), str_list, "trained models"),
                      Option("seeds", (0, 1, 2, 3, 4), int_list, "training seeds"),
                      Option("epochs", 20, int, "training epochs (best epoch chosen on val)"), _cdsm_score_option())),
        Task("compmap-cub", "compmap", "CompMap on CUB: n-way k-shot usefulness of concept activations and the "
             "interpretability gap (CompMap paper Tables 2-4)", (CLIP, ITM), "compmap/cub-episodes", run_compmap_cub,
             needs=("cub_dir",), seeded=True,
             options=(Option("ways", (5, 10, 100, 200), int_list, "n of n-way"), Option("shots", (1, 5), int_list, "k of k-shot"),
                      Option("episodes", 600, int, "episodes per setting"), Option("queries", 15, int, "query images per class (episodic protocol)"),
                      Option("seed", 0, int, "episode sampling seed"), Option("full_shot", True, _flag, "also 200-way full shot"),
                      Option("C", 1.0, float, "inverse L2 strength of the logistic regression"),
                      Option("templates", "paper", str, "paper | a3 | a3:<ids>"),
                      Option("group_softmax", True, _flag, "softmax over each attribute group"), _cub_protocol_option())),
        Task("compmap-mit-states", "compmap", "CompMap on MIT-States: generalized CZSL (AUC, best seen/unseen/HM) of "
             "composition models over concept activations (CompMap paper Tables 1, 3, 4)", (CLIP, ITM), "compmap/mit-states-czsl",
             run_compmap_mit_states, needs=("mit_states_dir",), seeded=True,
             options=(Option("world", "closed", _choice(("closed", "open", "both")), "closed | open | both"),
                      Option("czsl_curve", "paper", _choice(("paper", "authors")),
                             "paper: 20 biases from unseen gaps (A.6.2) | authors: their released curve, closed at bias 1e3"),
                      Option("targets", "text", _choice(("text", "primitives")), "composite-concept features of the contrastive model"),
                      Option("target_model", "openai/clip-vit-base-patch32", str, "dual encoder for pair texts when the model is ITM"),
                      Option("split_dir", "compositional-split-natural", str, "split folder under --mit-states-dir"),
                      Option("metadata", "", str, "metadata file (default metadata_<split_dir>.t7)"),
                      Option("epochs", 20, int, "contrastive model epochs"), Option("dim", 256, int, "contrastive model width"),
                      Option("lr", 1e-3, float, "contrastive model learning rate"), Option("seed", 0, int, "training seed"),
                      Option("templates", "paper", str, "paper | a3 | a3:<ids>"),
                      Option("group_softmax", True, _flag, "softmax over each attribute group"))),
        Task("conceptbed-ccd", "conceptbed", "ConceptBed: concept confidence deviation, accuracy of a concept learner's "
             "generated images by oracles (ConceptBed paper Tables 1, 7)", (GENERATED,), "conceptbed/ccd", run_conceptbed_ccd,
             needs=("concepts",), options=_conceptbed_options()),
    ]
    return {task.name: task for task in tasks}


def _conceptbed_options() -> tuple[Option, ...]:
    try:
        from conceptforge.filters import conceptbed_oracles as oracles
    except ImportError:  # the filters stage is optional for evaluation
        oracles = None
    default = lambda name: getattr(oracles, name, "") if oracles else ""  # noqa: E731
    return (Option("style_oracle", default("DEFAULT_STYLE_ORACLE"), str, "PACS style classifier"),
            Option("object_oracle", default("DEFAULT_OBJECT_ORACLE"), str, "ImageNet concept classifier"),
            Option("cub_oracle", default("DEFAULT_CUB_ORACLE"), str, "CUB 200-class classifier"),
            Option("vqa_model", default("DEFAULT_VQA_ORACLE"), str, "ViLT VQA model for compositions ('' or none: no VQA)"))


_TASKS: dict[str, Task] | None = None


def all_tasks() -> dict[str, Task]:
    global _TASKS
    if _TASKS is None:
        _TASKS = _registry()
    return _TASKS


def get_task(name: str) -> Task:
    tasks = all_tasks()
    if name not in tasks:
        raise InvalidArgumentError(f"unknown task {name!r}; run --tasks list (tasks: {', '.join(tasks)})")
    return tasks[name]


# ----------------------------------------------------------------------------------- selection
@dataclass
class TaskSelection:
    """A task as the user asked for it: dataset/revision overrides and option values applied."""

    task: Task
    dataset: str | None
    revision: str | None
    options: dict[str, Any]


def parse_dataset_override(text: str) -> tuple[str, str | None, str | None]:
    """``TASK=REPO[@REV]`` or ``TASK:REPO[@REV]`` -> (task, repo, revision); ``TASK=@REV`` keeps the repo."""
    for sep in ("=", ":"):
        if sep in text:
            name, _, target = text.partition(sep)
            break
    else:
        raise InvalidArgumentError(f"--dataset wants TASK=REPO[@REVISION], got {text!r}")
    repo, revision = target, None
    if "@" in target:
        head, _, tail = target.rpartition("@")
        if tail and "/" not in tail:
            repo, revision = head, tail
    return name.strip(), (repo.strip() or None), revision


def select_tasks(
    names: str,
    *,
    datasets: list[str] = (),  # type: ignore[assignment]
    revisions: list[str] = (),  # type: ignore[assignment]
    options: list[str] = (),  # type: ignore[assignment]
) -> list[TaskSelection]:
    """Parse ``--tasks a,b:REPO@REV``, ``--dataset TASK=REPO@REV``, ``--revision TASK=REV`` and
    ``--task-option TASK.NAME=VALUE`` into selections, checking every name up front."""
    selections: dict[str, TaskSelection] = {}
    for part in [p.strip() for p in names.split(",") if p.strip()]:
        if ":" in part:
            name, repo, revision = parse_dataset_override(part)
        else:
            name, repo, revision = part, None, None
        task = get_task(name)
        if name in selections:
            raise InvalidArgumentError(f"task {name} is listed twice in --tasks")
        selections[name] = TaskSelection(task, repo, revision, task.option_defaults())
    if not selections:
        raise InvalidArgumentError("--tasks is empty: name tasks (see --tasks list)")

    def target(name: str, flag: str) -> TaskSelection:
        if name not in selections:
            raise InvalidArgumentError(f"{flag} names task {name!r}, which is not in --tasks ({', '.join(selections)})")
        return selections[name]

    for text in datasets:
        name, repo, revision = parse_dataset_override(text)
        chosen = target(name, "--dataset")
        chosen.dataset = repo or chosen.dataset
        chosen.revision = revision or chosen.revision
    for text in revisions:
        name, sep, revision = text.partition("=")
        if not sep or not revision:
            raise InvalidArgumentError(f"--revision wants TASK=REVISION, got {text!r}")
        target(name.strip(), "--revision").revision = revision.strip()
    for text in options:
        key, sep, value = text.partition("=")
        name, dot, option = key.partition(".")
        if not sep or not dot:
            raise InvalidArgumentError(f"--task-option wants TASK.NAME=VALUE, got {text!r}")
        chosen = target(name.strip(), "--task-option")
        known = {o.name: o for o in chosen.task.options}
        if option not in known:
            raise InvalidArgumentError(f"task {name} has no option {option!r} (options: {', '.join(known) or 'none'})")
        try:
            chosen.options[option] = known[option].parse(value)
        except ConceptforgeError as error:
            raise InvalidArgumentError(f"--task-option {key}: {error}") from None
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"--task-option {key}: cannot read {value!r} ({known[option].help})") from None
    return list(selections.values())


def format_task_list() -> str:
    """The ``--tasks list`` table: name, model kinds, default dataset@revision, protocol, needs."""
    from conceptforge.loaders.reports import markdown_table

    rows = []
    for task in all_tasks().values():
        folder = next((need for need in task.needs if need.endswith("_dir")), None)
        dataset = (f"{task.dataset}@{task.revision}" if task.dataset else f"(local folder: --{folder.replace('_', '-')})" if folder
                   else "(the model: generated images)")
        needs = ", ".join("--" + n.replace("_", "-") for n in task.needs) or "–"
        rows.append([task.name, ", ".join(task.model_kinds), dataset, task.protocol, needs])
    options = []
    for task in all_tasks().values():
        for option in task.options:
            default = ",".join(map(str, option.default)) if isinstance(option.default, tuple) else option.default
            options.append(f"  {task.name}.{option.name} (default {default!s}): {option.help}")
    return (markdown_table(["task", "model kinds", "dataset@revision", "protocol", "needs"], rows)
            + "\n\ntask options (--task-option TASK.NAME=VALUE):\n" + "\n".join(options))
