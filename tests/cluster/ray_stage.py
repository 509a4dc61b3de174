"""Stages for the Ray tests, importable by Ray workers (``tests.cluster.ray_stage``).

``killer_stage``: the first attempt at one item kills its worker process outright (SIGKILL via
``os.kill``) after leaving a marker file, the way an OOM killer or a lost node ends a worker; every
later attempt finds the marker and makes the item. ``prepare`` appends to a log per load.
"""

from __future__ import annotations

import os
import signal

from conceptforge.engine.runner import Stage
from conceptforge.engine.workitems import WorkItem
from tests.engine import engine_stage


def _append(path: str, line: str) -> None:
    with open(path, "a") as handle:
        handle.write(line + "\n")


class KillOnce:
    def __init__(self, marker: str, victim: str, log: str) -> None:
        self.marker, self.victim, self.log = marker, victim, log
        self.make = engine_stage.make_factory(log, 0.0)

    def __call__(self, item: WorkItem):
        if item.item_id == self.victim and not os.path.exists(self.marker):
            _append(self.marker, str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.make(item)


class LoadLog:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> None:
        _append(self.path, str(os.getpid()))


def killer_stage(count: int, *, marker: str, victim: str, log: str, load_log: str | None = None) -> Stage:
    base = engine_stage.stage(count, chunk_size=4)
    return Stage(
        name=base.name,
        items=base.items,
        settings=base.settings,
        make_item=KillOnce(marker, victim, log),
        assembler=base.assembler,
        assembly_args=base.assembly_args,
        chunk_size=base.chunk_size,
        prepare=LoadLog(load_log) if load_log else None,
    )
