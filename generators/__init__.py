"""conceptforge.generators: emit benchmark candidates from a spec.

Each generator (TDG over FLUX in ``sub``, per-concept learners in ``conceptbed``, Blender scenes in
``binding``) turns its spec into work items and hands them to the core's run engine
(:mod:`conceptforge.engine.runner`), so ids, seeds, resumption and sharding work the same everywhere.
"""
