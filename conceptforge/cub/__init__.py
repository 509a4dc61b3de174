"""The one reader of a local CUB_200_2011 directory (Wah et al., 2011).

Why one module: SUB generation, SUB filtering, candidate selection, evaluation and annotation all
need parts of CUB (attribute vocabulary, classes, class-level labels, per-image records). CUB's
license forbids redistribution, so nothing of it is bundled: users point ``--cub-dir`` at the copy
they have, and every tool must accept the same layouts and fail with the same one-line errors.

Files (relative to the CUB root ``CUB_200_2011/``; ``--cub-dir`` may also name the folder holding
it, and ``attributes.txt`` may sit beside the root as it does in the tarball)::

    attributes.txt or attributes/attributes.txt     "<id> has_<group>::<value>"   (312 lines, 28 groups)
    classes.txt                                      "<id> <nnn>.<Class_Name>"      (200 lines)
    images.txt                                       "<image id> <relative path under images/>"
    image_class_labels.txt                           "<image id> <class id>"
    train_test_split.txt                             "<image id> <1 = train, 0 = test>"
    attributes/image_attribute_labels.txt            "<image id> <attr id> <present> <certainty> <time>"
    attributes/class_attribute_labels_continuous.txt 200 rows x 312 percentages

Class-level labels follow the majority vote used by CBMs (Koh et al.): an attribute is present for
a class when at least half of its images show it. Two readers exist because CUB ships two sources:
the percentage table (what generation uses; it also ranks values for S-) and the per-image labels
(what evaluation votes over; it works on directories without the percentage table).

The package is three modules: ``files`` (names, layout, text readers), ``metadata``
(vocabulary, class-level labels) and ``images`` (per-image records); everything is importable
from here.
"""

from conceptforge.cub.files import (
    ATTRIBUTES,
    CBM_MIN_CLASS_COUNT,
    CLASS_ATTRIBUTE_PERCENT,
    CLASSES,
    IMAGE_ATTRIBUTE_LABELS,
    IMAGE_CLASS_LABELS,
    IMAGES,
    MAJORITY_PERCENT,
    PUBLISHED_SEP,
    ROOT_NAME,
    SEP,
    TRAIN_TEST_SPLIT,
    CubLayout,
    attribute_group,
    attribute_value,
    bird_key,
    bird_name,
    class_image_dir,
    display_name,
    group_words,
    iter_image_attribute_labels,
    read_class_percent,
    read_int_pairs,
    read_numbered,
    read_rows,
    readable_attribute,
    split_attribute,
    to_cub_attribute,
    value_words,
    vote_class_labels,
)
from conceptforge.cub.images import CubDataset, CubImage
from conceptforge.cub.metadata import CubAttributes, CubMetadata, load_attributes, load_cub

__all__ = [
    "ROOT_NAME",
    "ATTRIBUTES",
    "CLASSES",
    "IMAGES",
    "IMAGE_CLASS_LABELS",
    "TRAIN_TEST_SPLIT",
    "IMAGE_ATTRIBUTE_LABELS",
    "CLASS_ATTRIBUTE_PERCENT",
    "SEP",
    "PUBLISHED_SEP",
    "MAJORITY_PERCENT",
    "CBM_MIN_CLASS_COUNT",
    "split_attribute",
    "group_words",
    "readable_attribute",
    "value_words",
    "to_cub_attribute",
    "attribute_group",
    "attribute_value",
    "bird_name",
    "bird_key",
    "display_name",
    "CubLayout",
    "class_image_dir",
    "read_rows",
    "read_numbered",
    "read_int_pairs",
    "iter_image_attribute_labels",
    "read_class_percent",
    "vote_class_labels",
    "CubImage",
    "CubDataset",
    "CubAttributes",
    "load_attributes",
    "CubMetadata",
    "load_cub",
]
