"""Items that fail: retried a few times, then recorded, so one bad item never stops a long run.

Why: a binding scene that cannot be placed or a generated image that came out NaN used to end the
whole shard with a traceback, hours in. The run engine (:mod:`conceptforge.engine.runner`) now makes each
item through :func:`make_with_retries`: an error of the item itself is retried up to
``attempts`` times, then the item is recorded as a :class:`FailedItem` and the shard goes on.

What counts as an error of the item: an :class:`~conceptforge.errors.ItemError`, or any exception
that is no :class:`~conceptforge.errors.ConceptforgeError` (a library raising on odd input). A
:class:`~conceptforge.errors.PermanentItemError` (a damaged weights file) is recorded at its first
attempt: a retry would only fail the same way. Other
ConceptforgeErrors (a missing GPU, a full disk, a store conflict) are about the run and stop it at
once, as does an interrupt. A stage whose items all fail is broken, not unlucky: after
``max_in_a_row`` failed items in a row the last error is raised as it is.

The store keeps each chunk's failures beside it (``failed/cNNNNNN.json``, written before the
chunk, removed when a rerun makes every item): ``conceptforge status`` lists them, a rerun of the
same command retries them, and assembly refuses while there are any unless told to leave them out
(``conceptforge assemble OUT --allow-failed``), which lists them in the card.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

from conceptforge.engine.store import ItemStore, chunk_name, io_error
from conceptforge.engine.workitems import WorkItem
from conceptforge.errors import ConceptforgeError, ItemError, PermanentItemError, StoreError, one_line
from conceptforge.serialization import canonical_json

logger = logging.getLogger(__name__)

#: Tries per item before it is recorded as failed.
ITEM_ATTEMPTS = 3
#: This many failed items in a row stop the run: the stage is broken, not the items.
MAX_FAILURES_IN_A_ROW = 5
FAILED_DIR = "failed"

T = TypeVar("T")


@dataclass(frozen=True)
class FailedItem:
    """An item that failed every attempt, with the last error as one line."""

    item_id: str
    split: str
    error: str
    attempts: int


def is_item_failure(error: BaseException) -> bool:
    """True for an error of one item (retry, then record); False for one of the run (stop)."""
    if not isinstance(error, Exception) or isinstance(error, MemoryError):
        return False
    return isinstance(error, ItemError) or not isinstance(error, ConceptforgeError)


class FailureCounter:
    """Failed items in a row across a shard; raises the last error when the stage looks broken."""

    def __init__(self, max_in_a_row: int = MAX_FAILURES_IN_A_ROW) -> None:
        self.max_in_a_row, self.in_a_row = max_in_a_row, 0

    def succeeded(self) -> None:
        self.in_a_row = 0

    def failed(self, error: BaseException) -> None:
        if isinstance(error, PermanentItemError):
            # Why not counted: it names its cause and costs no retries (e.g. the tasks of one sweep
            # model that does not load, each failing at once); a stage where every item fails
            # still ends the run, when none was made (conceptforge.engine.runner).
            return
        self.in_a_row += 1
        if self.in_a_row >= self.max_in_a_row:
            logger.error("%d items failed in a row: stopping (the stage, not the items, is at fault)", self.in_a_row)
            raise error


def make_with_retries(
    make: Callable[[], T],
    item: WorkItem,
    *,
    attempts: int = ITEM_ATTEMPTS,
    counter: FailureCounter | None = None,
    unit: str = "item",
) -> T | FailedItem:
    """``make()`` for one item, tried up to ``attempts`` times; a :class:`FailedItem` if all fail."""
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            result = make()
        except Exception as error:
            if not is_item_failure(error):
                raise
            last = error
            if isinstance(error, PermanentItemError):  # a retry cannot change it: recorded now
                logger.warning("%s %s failed (not retried): %s", unit, item.item_id, one_line(error))
                attempts = attempt
                break
            logger.warning(
                "%s %s failed (attempt %d of %d): %s: %s",
                unit,
                item.item_id,
                attempt,
                attempts,
                type(error).__name__,
                one_line(error),
            )
            continue
        if counter is not None:
            counter.succeeded()
        return result
    assert last is not None
    if counter is not None:
        counter.failed(last)
    # A permanent failure's message is ours and names its cause; another is a library's, named by its class.
    text = one_line(last) if isinstance(last, PermanentItemError) else f"{type(last).__name__}: {one_line(last)}"
    return FailedItem(item.item_id, item.split, text, attempts)


def _name(index: int) -> str:
    return f"{FAILED_DIR}/{chunk_name(index)}.json"


def record_failures(store: ItemStore, index: int, failures: Sequence[FailedItem]) -> None:
    """Write (or, with none, remove) the failures of chunk ``index``; call before the chunk."""
    try:
        if failures:
            store.location.write(_name(index), canonical_json([asdict(f) for f in failures]))
        elif store.location.exists(_name(index)):
            store.location.remove(_name(index))
    except OSError as error:
        raise io_error(error, "write to", str(store.location)) from None


def failed_chunks(store: ItemStore) -> set[int]:
    """Chunks with recorded failures (a rerun makes them again)."""
    indices = set()
    for name in store.location.listdir(FAILED_DIR):
        if name.startswith("c") and name.endswith(".json"):
            try:
                indices.add(int(name[1:-5]))
            except ValueError:
                continue
    return indices


def failed_items(store: ItemStore) -> list[FailedItem]:
    """The failed items of every complete chunk, in chunk order."""
    done = store.chunk_states()
    items: list[FailedItem] = []
    for index in sorted(failed_chunks(store) & set(done)):
        try:
            rows = json.loads(store.location.read(_name(index)))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as error:
            raise StoreError(
                f"cannot read the failed items of chunk {index} in {store.location}: {one_line(error)}"
            ) from None
        items += [FailedItem(**row) for row in rows]
    return items


def failures_section(failures: Sequence[FailedItem], *, limit: int = 50) -> str:
    """The card's note on items left out of an assembly made with ``--allow-failed``."""
    lines = [
        "## Failed items",
        "",
        f"{len(failures)} item(s) failed every attempt and are not in this dataset (assembled with `--allow-failed`):",
        "",
        "| item | split | attempts | last error |",
        "| --- | --- | ---: | --- |",
    ]
    for failure in failures[:limit]:
        error = failure.error.replace("|", "\\|")
        lines.append(f"| `{failure.item_id}` | {failure.split} | {failure.attempts} | {error} |")
    if len(failures) > limit:
        lines.append(f"| … {len(failures) - limit} more | | | |")
    return "\n".join(lines) + "\n"
