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
  SUB's 33 for the 112 subset), S− likewise; chance is 50%. Their scoring rule is in
  ``scoring.py`` (:func:`score_cbm_predictions`); wrapping a CBM is in ``cbm.py``.

Both are run by the tasks ``sub-vlm`` and ``sub-cbm`` (``tasks.py``), from the command line or
from Python with :func:`conceptforge.loaders.harness.runner.run_task`; this module holds the data
reading and the prompts they share.

Datasets are read in our schema (``attribute``/``removed_attribute`` with ``::``) or in the
published ``Jessica-bader/SUB`` schema (ClassLabel ``attr_label`` ``has_<group>--<value>`` and
``bird_label``), converted to ``::`` here at the boundary; S− for the published schema comes from
CUB's class-level labels.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from conceptforge.cub import (
    CubMetadata,
    attribute_group,
    attribute_value,
    bird_name,
    group_words,
    to_cub_attribute,
    value_words,
)
from conceptforge.errors import DataFormatError
from conceptforge.loaders.harness.data import image_column_raw, load_split, require_columns
from conceptforge.loaders.sub.scoring import (
    S_MINUS_RULES as S_MINUS_RULES,  # re-exported: the task table reads the rules here
)
from conceptforge.loaders.sub.scoring import SubItem

logger = logging.getLogger(__name__)

ATTRIBUTE_TEMPLATE = "a photo of a bird whose {group} is {value}"
NONE_TEMPLATE = "a photo of a bird"
OUR_COLUMNS = ("image", "bird", "attribute", "removed_attribute")
PUBLISHED_COLUMNS = ("image", "attr_label", "bird_label")


# ----------------------------------------------------------------------------------- data
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
        attrs = [
            attr_names[a] if attr_names and isinstance(a, (int, np.integer)) else str(a) for a in dataset["attr_label"]
        ]
        birds = [
            bird_names[b] if bird_names and isinstance(b, (int, np.integer)) else str(b) for b in dataset["bird_label"]
        ]
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


def load_sub(
    source: str, *, split: str = "test", revision: str | None = None, cub: CubMetadata | None = None
) -> list[SubItem]:
    """Load SUB items from a local dataset directory or a Hub repo id (at ``revision``)."""
    items, schema = items_from_dataset(load_split(source, split, revision=revision), cub=cub)
    logger.info("SUB %s (%s schema): %d images", source, schema, len(items))
    return items


# ----------------------------------------------------------------------------------- VLMs


def attribute_prompt(attribute: str, template: str = ATTRIBUTE_TEMPLATE) -> str:
    return template.format(group=group_words(attribute_group(attribute)), value=value_words(attribute_value(attribute)))
