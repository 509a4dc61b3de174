"""The evaluation harness of ``conceptforge evaluate``: tasks, their runner, and the model adapters."""
