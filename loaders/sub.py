"""SUB evaluation (SUB paper §5.4–5.6, Appendix F): S+ and S− accuracy of VLMs and CBMs.

* **S+**: the model detects the substituted attribute. **S−** (``s_minus="paper"``, the default,
  Appendix F and §5.6): scored only on the images whose bird's class-wise *CBM* labels (majority
  vote, restricted to the 112-attribute CBM subset: attributes present in >= 10 classes) mark
  another attribute of the S+ group present; "that attribute", target 0, must not be detected.
  When the class-wise labels mark several (a crown both black and white), the first in CUB's
  attribute order is taken (the authors' scripts do the same).
  ``s_minus="any-original"`` (conceptforge v1): S− is right only if *none* of the bird's
  original attributes of the group is detected, the originals coming from the dataset's
  ``removed_attribute`` column (ours) or from the voted labels over all 312 attributes
  (published schema) — a stricter score for multi-valued groups.
  Two bugs of the authors' evaluation scripts are not reproduced (reported in issue 15): their
  attribute names mix CUB's ``::`` and the published ``--`` forms, so the lookups of the other
  form match nothing and score nothing; and a stale loop variable makes every image's S− check
  use the wing-pattern group.
* **VLMs** classify each image within the substituted attribute's group, over CUB's attribute
  prompts plus a "none" prompt; the argmax is "present", everything else "absent". Chance
  (Appendix F): S+ = mean of 1/(|A|+1), S− = mean of 1 − r/(|A|+1) over the S− images (r, the
  number of removed attributes, is 1 in the paper's data).
* **CBMs** output concept logits over CUB's 312 attributes or the 112-attribute CBM subset;
  present = sigmoid ≥ 0.5. S+ is scored on the images whose S+ is in the model's vocabulary (17 of
  SUB's 33 for the 112 subset), S− likewise; chance is 50%.

Datasets are read in our schema (``attribute``/``removed_attribute`` with ``::``) or in the
published ``Jessica-bader/SUB`` schema (ClassLabel ``attr_label`` ``has_<group>--<value>`` and
``bird_label``), converted to ``::`` here at the boundary; S− for the published schema comes from
CUB's class-level labels.
"""

from __future__ import annotations

import importlib
import logging
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.cub import CBM_MIN_CLASS_COUNT, CubMetadata, attribute_group, attribute_value, bird_name, to_cub_attribute
from conceptforge.loaders.data import image_column_raw, load_split, require_columns
from conceptforge.loaders.reports import markdown_table, pct

logger = logging.getLogger(__name__)

S_MINUS_RULES = ("paper", "any-original")
S_MINUS_TEXT = {
    "paper": "S− = the bird's class-wise CBM (112-attribute) label of the group, target 0 (paper App. F)",
    "any-original": "S− = none of the bird's original attributes of the group detected (conceptforge v1)",
}
DEFAULT_VLM = "openai/clip-vit-base-patch32"
ATTRIBUTE_TEMPLATE = "a photo of a bird whose {group} is {value}"
NONE_TEMPLATE = "a photo of a bird"
OUR_COLUMNS = ("image", "bird", "attribute", "removed_attribute")
PUBLISHED_COLUMNS = ("image", "attr_label", "bird_label")


# ----------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class SubItem:
    """One SUB image with its S+ attribute and S− attribute(s), all in ``has_<group>::<value>`` form."""

    image: Any
    bird: str
    attribute: str
    removed: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return attribute_group(self.attribute)


def _split_removed(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    parts = value if isinstance(value, (list, tuple)) else str(value).split(";")
    return tuple(to_cub_attribute(p) for p in parts if str(p).strip())


def _label_names(dataset, column: str) -> list[str] | None:
    feature = dataset.features.get(column)
    names = getattr(feature, "names", None)
    return list(names) if names else None


def items_from_dataset(dataset, *, cub: CubMetadata | None = None) -> tuple[list[SubItem], str]:
    """SUB items from a ``datasets.Dataset`` in our or the published schema; returns (items, schema)."""
    columns = set(dataset.column_names)
    images = None
    if {"attribute", "bird"} <= columns:
        require_columns(dataset, OUR_COLUMNS, what="SUB")
        images = image_column_raw(dataset)
        items = [
            SubItem(image=img, bird=bird_name(b), attribute=to_cub_attribute(a), removed=_split_removed(r))
            for img, b, a, r in zip(images, dataset["bird"], dataset["attribute"], dataset["removed_attribute"])
        ]
        schema = "conceptforge"
    elif {"attr_label", "bird_label"} & columns:
        require_columns(dataset, PUBLISHED_COLUMNS, what="published SUB")
        images = image_column_raw(dataset)
        attr_names, bird_names = _label_names(dataset, "attr_label"), _label_names(dataset, "bird_label")
        attrs = [attr_names[a] if attr_names and isinstance(a, (int, np.integer)) else str(a) for a in dataset["attr_label"]]
        birds = [bird_names[b] if bird_names and isinstance(b, (int, np.integer)) else str(b) for b in dataset["bird_label"]]
        items = []
        has_class_labels = cub is not None and cub.class_labels is not None
        if not has_class_labels:
            logger.warning("published SUB schema without CUB class-level labels: S- cannot be scored (pass --cub-dir)")
        for img, a, b in zip(images, attrs, birds):
            attribute = to_cub_attribute(a)
            removed: tuple[str, ...] = ()
            if has_class_labels:
                group = attribute_group(attribute)
                removed = tuple(
                    sorted(x for x in cub.class_attributes(b) if attribute_group(x) == group and x != attribute)
                )
            items.append(SubItem(image=img, bird=bird_name(b), attribute=attribute, removed=removed))
        schema = "published"
    else:
        raise DataFormatError(
            "SUB dataset lacks the columns of either schema: need "
            f"{', '.join(OUR_COLUMNS)} (conceptforge) or {', '.join(PUBLISHED_COLUMNS)} (Jessica-bader/SUB); "
            f"has {', '.join(dataset.column_names)}"
        )
    if cub is not None:
        for item in items:
            cub.check_attribute(item.attribute)
            for removed in item.removed:
                cub.check_attribute(removed)
    return items, schema


def load_sub(source: str, *, split: str = "test", revision: str | None = None, cub: CubMetadata | None = None) -> list[SubItem]:
    """Load SUB items from a local dataset directory or a Hub repo id (at ``revision``)."""
    items, schema = items_from_dataset(load_split(source, split, revision=revision), cub=cub)
    logger.info("SUB %s (%s schema): %d images", source, schema, len(items))
    return items


# ----------------------------------------------------------------------------------- scoring
@dataclass
class SubItemScore:
    bird: str
    attribute: str
    removed: list[str]
    prediction: list[str]  # attributes predicted present (VLM: at most one; [] = "none")
    s_plus: bool | None  # None = not scored
    s_minus: bool | None
    chance_plus: float | None
    chance_minus: float | None


@dataclass
class Tally:
    plus_correct: int = 0
    plus_total: int = 0
    minus_correct: int = 0
    minus_total: int = 0
    chance_plus_sum: float = 0.0
    chance_minus_sum: float = 0.0

    def add(self, result: SubItemScore) -> None:
        if result.s_plus is not None:
            self.plus_total += 1
            self.plus_correct += int(result.s_plus)
            self.chance_plus_sum += result.chance_plus or 0.0
        if result.s_minus is not None:
            self.minus_total += 1
            self.minus_correct += int(result.s_minus)
            self.chance_minus_sum += result.chance_minus or 0.0

    @staticmethod
    def _ratio(a: float, b: int) -> float:
        return a / b if b else float("nan")

    def summary(self) -> dict[str, float | int]:
        return {
            "s_plus": self._ratio(self.plus_correct, self.plus_total),
            "s_minus": self._ratio(self.minus_correct, self.minus_total),
            "chance_s_plus": self._ratio(self.chance_plus_sum, self.plus_total),
            "chance_s_minus": self._ratio(self.chance_minus_sum, self.minus_total),
            "n_s_plus": self.plus_total,
            "n_s_minus": self.minus_total,
        }


@dataclass
class SubReport:
    """S+/S− accuracies, chance baselines and per-attribute / per-bird breakdowns."""

    kind: str  # "vlm" or "cbm"
    model: str
    revision: str
    summary: dict[str, float | int]
    per_attribute: dict[str, dict[str, float | int]]
    per_bird: dict[str, dict[str, float | int]]
    items: list[SubItemScore] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def s_plus(self) -> float:
        return float(self.summary["s_plus"])

    @property
    def s_minus(self) -> float:
        return float(self.summary["s_minus"])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return data

    def format(self) -> str:
        s = self.summary
        rule = self.settings.get("s_minus")
        title = f"SUB, {self.kind.upper()} {self.model}: {S_MINUS_TEXT.get(rule, rule)}\n\n" if rule else ""
        head = title + markdown_table(
            ["", "S+", "S−", "n(S+)", "n(S−)"],
            [
                ["Random chance", pct(s["chance_s_plus"]), pct(s["chance_s_minus"]), s["n_s_plus"], s["n_s_minus"]],
                [f"{self.model} ({self.kind})", pct(s["s_plus"]), pct(s["s_minus"]), s["n_s_plus"], s["n_s_minus"]],
            ],
        )

        def breakdown(title: str, table: dict[str, dict[str, float | int]]) -> str:
            rows = [
                [key, pct(v["s_plus"]), pct(v["chance_s_plus"]), pct(v["s_minus"]), pct(v["chance_s_minus"]), v["n_s_plus"]]
                for key, v in sorted(table.items())
            ]
            return f"{title}\n\n" + markdown_table([title.split()[1], "S+", "chance", "S−", "chance", "n"], rows)

        return "\n\n".join([head, breakdown("Per attribute", self.per_attribute), breakdown("Per bird", self.per_bird)])


def build_report(kind: str, model: str, revision: str, results: Sequence[SubItemScore], settings: dict | None = None) -> SubReport:
    total, per_attribute, per_bird = Tally(), defaultdict(Tally), defaultdict(Tally)
    for result in results:
        total.add(result)
        per_attribute[result.attribute].add(result)
        per_bird[result.bird].add(result)
    return SubReport(
        kind=kind,
        model=model,
        revision=revision,
        summary=total.summary(),
        per_attribute={k: v.summary() for k, v in per_attribute.items()},
        per_bird={k: v.summary() for k, v in per_bird.items()},
        items=list(results),
        settings=dict(settings or {}),
    )


def s_minus_targets(
    items: Sequence[SubItem], cub: CubMetadata | None, *, rule: str = "paper", cbm_min_classes: int = CBM_MIN_CLASS_COUNT
) -> list[list[str]]:
    """The attribute(s) each item's S− checks (empty: S− not scored for that item).

    ``"paper"``: the first (CUB order) attribute of the S+ group, other than S+, present in the
    bird's class-wise labels within the CBM subset (attributes present in >= ``cbm_min_classes``
    classes; 10 gives Koh et al.'s 112). ``"any-original"``: ``item.removed`` within the group.
    """
    if rule not in S_MINUS_RULES:
        raise InvalidArgumentError(f"unknown S- rule {rule!r} (choose from {', '.join(S_MINUS_RULES)})")
    if rule == "any-original":
        return [[r for r in item.removed if attribute_group(r) == item.group and r != item.attribute] for item in items]
    if cub is None or cub.class_labels is None:
        raise DataNotFoundError("S- (paper rule) needs CUB's class-level labels: pass a CUB directory with image attribute labels")
    subset = set(cub.cbm_attributes(cbm_min_classes))
    targets = []
    for item in items:
        labelled = cub.class_attributes(item.bird) & subset
        present = [a for a in cub.group_attributes(item.group) if a in labelled and a != item.attribute]
        targets.append(present[:1])  # group_attributes are in CUB's attribute order
    return targets


def score_vlm_predictions(
    items: Sequence[SubItem], predictions: Sequence[str | None], cub: CubMetadata, *,
    s_minus: str = "paper", cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> list[SubItemScore]:
    """Score one within-group choice per image (``None`` = the "none" option), Appendix F chance."""
    if len(items) != len(predictions):
        raise ValueError("one prediction per item")
    targets = s_minus_targets(items, cub, rule=s_minus, cbm_min_classes=cbm_min_classes)
    results = []
    for item, predicted, removed in zip(items, predictions, targets):
        options = len(cub.groups[item.group]) + 1  # + "none"
        results.append(
            SubItemScore(
                bird=item.bird,
                attribute=item.attribute,
                removed=removed,
                prediction=[predicted] if predicted else [],
                s_plus=predicted == item.attribute,
                s_minus=(predicted not in removed) if removed else None,
                chance_plus=1.0 / options,
                chance_minus=(1.0 - len(removed) / options) if removed else None,
            )
        )
    return results


def score_cbm_predictions(
    items: Sequence[SubItem], present: np.ndarray, concept_names: Sequence[str], *,
    cub: CubMetadata | None = None, s_minus: str = "paper", cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> list[SubItemScore]:
    """Score binary concept predictions ``present`` [N, C] over ``concept_names``; chance is 50%.

    S− needs ``cub`` under the paper rule; an S− attribute outside the CBM's outputs is not scored.
    """
    present = np.asarray(present, dtype=bool)
    index = {name: i for i, name in enumerate(concept_names)}
    if present.shape != (len(items), len(concept_names)):
        raise InvalidArgumentError(f"CBM predictions have shape {present.shape}, expected {(len(items), len(concept_names))}")
    targets = s_minus_targets(items, cub, rule=s_minus, cbm_min_classes=cbm_min_classes)
    results = []
    for row, item, wanted in zip(present, items, targets):
        removed = [r for r in wanted if r in index and r != item.attribute]
        plus = bool(row[index[item.attribute]]) if item.attribute in index else None
        minus = (not any(row[index[r]] for r in removed)) if removed else None
        results.append(
            SubItemScore(
                bird=item.bird,
                attribute=item.attribute,
                removed=removed,
                prediction=[concept_names[j] for j in np.flatnonzero(row) if attribute_group(concept_names[j]) == item.group],
                s_plus=plus,
                s_minus=minus,
                chance_plus=0.5 if plus is not None else None,
                chance_minus=0.5 if minus is not None else None,
            )
        )
    return results


# ----------------------------------------------------------------------------------- VLMs
def group_words(group: str) -> str:
    """``has_upper_tail_color`` -> ``upper tail color``."""
    return group.removeprefix("has_").replace("_", " ")


def value_words(value: str) -> str:
    """``curved_(up_or_down)`` -> ``curved (up or down)``."""
    return value.replace("_", " ")


def attribute_prompt(attribute: str, template: str = ATTRIBUTE_TEMPLATE) -> str:
    return template.format(group=group_words(attribute_group(attribute)), value=value_words(attribute_value(attribute)))


def _resolve_items(dataset, cub: CubMetadata, revision: str | None, split: str) -> list[SubItem]:
    if isinstance(dataset, (str,)) or hasattr(dataset, "__fspath__"):
        return load_sub(str(dataset), split=split, revision=revision, cub=cub)
    if hasattr(dataset, "column_names"):
        return items_from_dataset(dataset, cub=cub)[0]
    items = list(dataset)
    for item in items:
        cub.check_attribute(item.attribute)
    return items


def evaluate_vlm(
    model: str | Any = DEFAULT_VLM,
    dataset: Any = None,
    *,
    cub: CubMetadata,
    revision: str | None = None,
    dataset_revision: str | None = None,
    split: str = "test",
    cache_dir: str | None = None,
    device: str | None = None,
    template: str = ATTRIBUTE_TEMPLATE,
    none_prompt: str = NONE_TEMPLATE,
    batch_size: int = 32,
    s_minus: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> SubReport:
    """Evaluate a dual encoder (model id / local dir, or an ``EmbeddingModel``) on SUB.

    ``dataset``: a local dir or Hub id, a ``datasets.Dataset``, or a list of :class:`SubItem`.
    Options per image: every CUB attribute of the S+ group (prompt ``template``) plus ``none_prompt``.
    """
    from conceptforge.loaders.embeddings import EmbeddingModel

    if dataset is None:
        raise InvalidArgumentError("evaluate_vlm needs a dataset (local dir, Hub id, datasets.Dataset or SubItems)")
    embedder = model if isinstance(model, EmbeddingModel) else EmbeddingModel.from_pretrained(
        model, revision=revision, cache_dir=cache_dir, device=device
    )
    items = _resolve_items(dataset, cub, dataset_revision, split)
    groups = sorted({item.group for item in items})
    options: dict[str, list[str | None]] = {g: [*cub.groups[g], None] for g in groups}
    prompts = {g: [attribute_prompt(a, template) if a else none_prompt for a in options[g]] for g in groups}
    text = {g: embedder.embed_texts(prompts[g]) for g in groups}
    images = embedder.embed_images([item.image for item in items], batch_size=batch_size)
    predictions: list[str | None] = []
    for item, vector in zip(items, images):
        scores = text[item.group] @ vector
        predictions.append(options[item.group][int(torch.argmax(scores))])
    results = score_vlm_predictions(items, predictions, cub, s_minus=s_minus, cbm_min_classes=cbm_min_classes)
    return build_report(
        "vlm",
        embedder.model_id,
        embedder.revision,
        results,
        {"template": template, "none_prompt": none_prompt, "label_set": "CUB 312 attributes, within group, + none",
         "s_minus": s_minus, "cbm_min_classes": cbm_min_classes},
    )


# ----------------------------------------------------------------------------------- CBMs
ConceptPredictor = Callable[[list[Any]], Any]


def as_concept_predictor(model: Any, *, transform: Callable[[Any], torch.Tensor] | None = None, device: str = "cpu") -> ConceptPredictor:
    """Wrap a callable on PIL images, or a torch module plus a per-image ``transform``, as
    ``predict(list_of_PIL) -> logits [B, C]``."""
    if isinstance(model, torch.nn.Module):
        if transform is None:
            raise InvalidArgumentError("a torch module CBM needs a transform mapping a PIL image to an input tensor")
        module = model.eval().to(device)

        def predict(images: list[Any]) -> torch.Tensor:
            batch = torch.stack([transform(image) for image in images]).to(device)
            with torch.inference_mode():
                output = module(batch)
            return output[0] if isinstance(output, (tuple, list)) else output

        return predict
    if not callable(model):
        raise InvalidArgumentError(f"a CBM must be callable or a torch module, got {type(model).__name__}")
    return model


def load_cbm_factory(spec: str) -> Any:
    """``package.module:function`` -> the object the function returns (a callable, a module, or
    a ``(module, transform)`` pair)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidArgumentError(f"--cbm must be 'package.module:function', got {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise InvalidArgumentError(f"cannot import CBM factory {spec!r}: {error}") from None
    return factory()


def cbm_concept_names(num_concepts: int, cub: CubMetadata, concept_names: Sequence[str] | None = None) -> list[str]:
    """Concept order of a CBM's outputs: explicit names, all 312 CUB attributes, or the 112 subset."""
    if concept_names is not None:
        names = [to_cub_attribute(n) for n in concept_names]
        if len(names) != num_concepts:
            raise InvalidArgumentError(
                f"the CBM outputs {num_concepts} concepts but {len(names)} concept names were given: vocabularies do not match"
            )
        for name in names:
            cub.check_attribute(name)
        return names
    if num_concepts == len(cub.attributes):
        return list(cub.attributes)
    subset = cub.cbm_attributes() if cub.class_labels is not None else []
    if num_concepts == len(subset):
        return subset
    raise InvalidArgumentError(
        f"the CBM outputs {num_concepts} concepts, matching neither CUB's {len(cub.attributes)} attributes nor the "
        f"{len(subset) or 112}-attribute CBM subset: pass concept names"
    )


def evaluate_cbm(
    model: Any,
    dataset: Any,
    *,
    cub: CubMetadata,
    concept_names: Sequence[str] | None = None,
    transform: Callable[[Any], torch.Tensor] | None = None,
    outputs: str = "logits",
    threshold: float = 0.5,
    name: str = "cbm",
    dataset_revision: str | None = None,
    split: str = "test",
    batch_size: int = 32,
    device: str = "cpu",
    s_minus: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> SubReport:
    """Evaluate a concept-bottleneck model; present = sigmoid(logit) ≥ ``threshold`` (or
    probability ≥ ``threshold`` with ``outputs="probabilities"``)."""
    from conceptforge.progress import tqdm

    from conceptforge.loaders.embeddings import load_pil

    if outputs not in ("logits", "probabilities"):
        raise InvalidArgumentError(f"outputs must be 'logits' or 'probabilities', got {outputs!r}")
    predict = as_concept_predictor(model, transform=transform, device=device)
    items = _resolve_items(dataset, cub, dataset_revision, split)
    chunks = []
    for start in tqdm(range(0, len(items), batch_size), desc="CBM", leave=False):
        batch = [load_pil(item.image) for item in items[start : start + batch_size]]
        output = predict(batch)
        chunks.append(torch.as_tensor(np.asarray(output.detach().cpu() if isinstance(output, torch.Tensor) else output), dtype=torch.float32))
    scores = torch.cat(chunks) if chunks else torch.zeros((0, len(cub.attributes)))
    probabilities = torch.sigmoid(scores) if outputs == "logits" else scores
    names = cbm_concept_names(scores.shape[1], cub, concept_names)
    results = score_cbm_predictions(items, (probabilities >= threshold).numpy(), names, cub=cub, s_minus=s_minus,
                                    cbm_min_classes=cbm_min_classes)
    return build_report("cbm", name, "", results, {"threshold": threshold, "outputs": outputs, "num_concepts": len(names),
                                                   "s_minus": s_minus, "cbm_min_classes": cbm_min_classes})
