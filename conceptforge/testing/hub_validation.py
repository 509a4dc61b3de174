"""The local Hub's checks of evaluation files: a dataset's ``eval.yaml``, a model's
``.eval_results/*.yaml`` and a card's ``model-index``, refused where the Hub would flag them.

Why apart from the server (``hub_server.py``): the checks are pure functions of a file's text, so
tests can read what the Hub would say about a file without starting a server.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


def _split_card_yaml(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """YAML header of a README: (data, error)."""
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    if not match:
        return {}, None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        return None, f"Invalid YAML in README.md: {error}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, "README.md metadata must be a YAML mapping"
    return data, None


def evaluation_file_problems(repo_type: str, path: str, data: bytes) -> list[str]:
    """What the Hub flags in a dataset's root ``eval.yaml`` or a model's ``.eval_results/*.yaml``
    (:mod:`conceptforge.cards.hub_eval`, the documented schema); empty for any other file."""
    from conceptforge.cards.hub_eval import (
        EVAL_RESULTS_DIR,
        EVAL_YAML,
        eval_results_problems,
        eval_yaml_problems,
        parse_yaml,
    )

    if repo_type == "dataset" and path == EVAL_YAML:
        check = eval_yaml_problems
    elif repo_type == "model" and path.startswith(EVAL_RESULTS_DIR + "/") and path.endswith((".yaml", ".yml")):
        check = lambda parsed: eval_results_problems(parsed, file=path)  # noqa: E731
    else:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [f"{path} is not UTF-8 text"]
    parsed, problems = parse_yaml(text, file=path)
    return problems or check(parsed)


def _metadata_errors(data: dict[str, Any], repo_type: str) -> list[str]:
    """What the Hub's metadata validation rejects (the subset our cards can get wrong).

    The Hub answers ``POST /api/validate-yaml`` with 400 and the reasons when the README's
    metadata is invalid: a license that is not a Hub license id, list-typed keys given as
    something else, ``configs`` without ``config_name``/``data_files``, ``dataset_info`` entries
    that do not name their config when there are several.
    """
    from conceptforge.cards.validate import HUB_LICENSES  # the Hub's published license ids

    errors = []
    licenses = data.get("license")
    for license_id in licenses if isinstance(licenses, list) else [licenses] if licenses is not None else []:
        if not isinstance(license_id, str) or license_id not in HUB_LICENSES:
            errors.append(f'"license" must be one of the Hub license ids, got {license_id!r}')
    for key in ("tags", "task_categories", "size_categories", "source_datasets", "language", "task_ids"):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            errors.append(f'"{key}" must be a string or a list of strings')
    if repo_type == "dataset":
        configs = data.get("configs")
        if configs is not None:
            if not isinstance(configs, list):
                errors.append('"configs" must be a list')
            else:
                names = []
                for config in configs:
                    if not isinstance(config, dict) or not isinstance(config.get("config_name"), str):
                        errors.append('"configs" entries need a "config_name" string')
                        continue
                    names.append(config["config_name"])
                    files = config.get("data_files")
                    if files is not None and not isinstance(files, (str, list)):
                        errors.append(f'config {config["config_name"]!r}: "data_files" must be a string or a list')
                if len(names) != len(set(names)):
                    errors.append('"configs" names a config twice')
        info = data.get("dataset_info")
        if isinstance(info, list):
            if len(info) > 1 and not all(isinstance(i, dict) and isinstance(i.get("config_name"), str) for i in info):
                errors.append('"dataset_info" entries need a "config_name" when there are several')
        elif info is not None and not isinstance(info, dict):
            errors.append('"dataset_info" must be a mapping or a list of mappings')
    return errors
