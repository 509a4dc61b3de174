"""Blender CLEVR-style binding scenes (paper 004): single-object, two-object and relational.

The scene *description* (:mod:`generators.binding.scene`) and the dataset logic
(:mod:`generators.binding.compositions`, :mod:`generators.binding.dataset`) are plain Python and
testable without Blender; only :mod:`generators.binding.render_blender` imports ``bpy``.
"""
