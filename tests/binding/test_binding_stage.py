"""The binding stage has the shape of every stage: ``build_stage(config)``, with the config
rebuilt from the run's stored settings, and no render option kept in module state."""

from __future__ import annotations

import subprocess
import sys

from conceptforge.generators.binding import stage as generate
from conceptforge.generators.binding.dataset import BindingConfig, binding_command, plan_items


def test_build_stage_from_stored_settings_makes_the_same_stage():
    config = BindingConfig(dataset="two-object", split_sizes={"train": 5, "val": 2, "gen": 2}, seed=3)
    stage = generate.build_stage(config)
    again = generate.build_stage(BindingConfig(**stage.settings))  # what run.json keeps
    assert [(i.item_id, i.seed) for i in again.items] == [(i.item_id, i.seed) for i in stage.items]
    assert [i.item_id for i in stage.items] == [i.item_id for i in plan_items(config)] and len(stage.items) == 9
    assert stage.assembler is generate.ASSEMBLER and stage.assembly_args["command_line"] == binding_command(config)
    # one worker: a chunk renders as one batch in this process (finishing overlapped), no pool
    assert stage.make_item is None and not isinstance(stage.process_batch, generate._PoolBatches)
    # building a stage renders nothing and loads no Blender (checked in a fresh interpreter)
    code = (
        "import sys; from conceptforge.generators.binding.stage import build_stage; "
        "from conceptforge.generators.binding.dataset import BindingConfig; "
        "build_stage(BindingConfig(dataset='relational', split_sizes={'train': 2})); print('bpy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout.split() == [
        "False"
    ]


def test_several_workers_render_in_a_pool_with_the_options_passed_along():
    config = BindingConfig(dataset="single-object", split_sizes={"train": 2})
    stage = generate.build_stage(config, num_workers=2, device="cpu")
    batches = stage.process_batch
    assert stage.make_item is None and isinstance(batches, generate._PoolBatches)
    assert batches.options["device"] == "cpu" and batches.options["threads"] >= 1
    assert batches.pool is None  # spawned on the first chunk only
    assert not hasattr(generate, "_RENDER_OPTIONS")
