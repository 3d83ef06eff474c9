"""The hostile ``note`` table of the reliability suite: cycles, dangling ids, huge and odd values.

:func:`hostile_rows` builds the rows (plain dicts for ``NoteStore.insert``); ``children`` and
``inbound`` size the note with many children and the note with many inbound link notes. The ids of
the interesting notes are module constants, and :data:`FOCI` names the focus notes the tests compute.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

ROOT = 1
CYCLE2 = (10, 11)  # 10's parent is 11 and 11's parent is 10
CYCLE3 = (12, 13, 14)  # 12 -> 13 -> 14 -> 12
UNDER_CYCLE = 9  # a live note whose parent is in the 2-cycle
SELF_TARGET = 15  # a link note whose target is itself
SELF_PARENT = 16  # a note that is its own parent
DANGLING_PARENT = 17  # parent_id names no note
DANGLING_TARGET = 18  # target_note_id names no note
MISSING_PARENT, MISSING_TARGET = 999_999, 999_998
HUGE_DETAILS = 19  # 1 MB of details
UNDER_HUGE = 29  # a child of HUGE_DETAILS (shows it as a related note, truncated)
BIG_PARENT = 20  # the note with many children
TARGET = 21  # the note with many inbound link notes
DELETED_FOCUS = 23
DELETED_PARENT = 24  # deleted, with a live child
LIVE_UNDER_DELETED = 25
LINK_TO_DELETED = 26  # a live link note whose target is deleted
NUL_NOTE = 27  # NUL characters in title and details
UNICODE_PARENT = 30  # children with emoji / CJK / right-to-left titles and details
ORDER_PARENT = 40  # children with equal, negative and extreme sibling_order
EXTREME_ORDERS = {
    41: -(2**63),
    42: 2**63 - 1,
    43: 0,
    44: 0,
    45: -1,
    46: -(2**63),
    47: 2**63 - 1,
    48: 1_767_225_600_000_000,
}
FIRST_CHILD = 100_000  # ids of BIG_PARENT's children start here
FIRST_LINK = 1_000_000  # ids of the inbound link notes start here

EMOJI = "👩\u200d👩\u200d👧\u200d👦🇯🇵👍🏽"
CJK = "漢字かな交じり文𠜎𠜱"
RTL = "שלום עולם مرحبا بالعالم \u202eevil\u202c"
UNICODE_TEXTS = {
    31: (EMOJI * 3, EMOJI * 40),
    32: (CJK, CJK * 30),
    33: (RTL, RTL * 10),
    34: ("e\u0301" * 20 + "\ufeff\u200b", "🍩" * 37 + "ab" + "😀" * 10),  # 150-byte cut inside an emoji
    35: ("\U0010fffd private use", "\U0001f600" * 38),  # exactly 152 bytes
}
NOW = dt.datetime(2026, 1, 1)
DELETED_AT = dt.datetime(2025, 6, 1, 12, 0, 0, 123000)
MEGABYTE = 1024 * 1024


def huge_details() -> str:
    """1 MiB of UTF-8 without any whitespace run tiktoken could split on cheaply."""
    unit = "a" * 1000 + "漢" * 100 + "🍩" * 50 + "\x00"
    data = (unit * (MEGABYTE // len(unit.encode()) + 1)).encode()
    return data[:MEGABYTE].decode(errors="ignore")  # at most 1 MiB, never half a character


def _row(note_id: int, parent: int | None = None, *, target: int | None = None,
         order: int | None = None, title: str | None = None, details: str | None = None,
         created: dt.datetime | None = None, deleted: bool = False) -> dict[str, Any]:
    return {
        "id": note_id, "parent_id": parent, "target_note_id": target,
        "sibling_order": note_id * 1000 if order is None else order,
        "topic_constructor": title if title is not None else
        (f":link {note_id}" if target is not None else f"note {note_id}"),
        "description": details,
        "created_at": created or NOW - dt.timedelta(days=note_id % 900, seconds=note_id % 86_400),
        "updated_at": None, "deleted_at": DELETED_AT if deleted else None,
        "notebook_id": 1, "creator_id": 1,
    }


def hostile_rows(children: int, inbound: int) -> list[dict[str, Any]]:
    """Every hostile shape; ``children`` under BIG_PARENT, ``inbound`` link notes into TARGET."""
    if inbound > children:
        raise ValueError("each inbound link note hangs under one of BIG_PARENT's children")
    rows = [
        _row(ROOT, title="Hostile notebook", details="The root.",
             created=dt.datetime(1970, 1, 1, 0, 0, 1)),
        _row(UNDER_CYCLE, CYCLE2[0], title="Hangs off the 2-cycle"),
        _row(CYCLE2[0], CYCLE2[1], title="Cycle A"),
        _row(CYCLE2[1], CYCLE2[0], title="Cycle B", details="b" * 400),
        _row(CYCLE3[0], CYCLE3[1], title="Triangle A"),
        _row(CYCLE3[1], CYCLE3[2], title="Triangle B", target=CYCLE3[0]),
        _row(CYCLE3[2], CYCLE3[0], title="Triangle C"),
        _row(SELF_TARGET, ROOT, target=SELF_TARGET, title=":is itself"),
        _row(SELF_PARENT, SELF_PARENT, title="Its own parent"),
        _row(DANGLING_PARENT, MISSING_PARENT, title="Orphan with a dangling parent"),
        _row(DANGLING_TARGET, ROOT, target=MISSING_TARGET, title=":points nowhere"),
        _row(HUGE_DETAILS, ROOT, title="One megabyte", details=huge_details(),
             created=dt.datetime(2038, 1, 19, 3, 14, 7)),
        _row(UNDER_HUGE, HUGE_DETAILS, title="Under the megabyte"),
        _row(BIG_PARENT, ROOT, title="Parent of a crowd", details="many children"),
        _row(TARGET, ROOT, title="Everybody points here", details="popular"),
        _row(DELETED_FOCUS, ROOT, title="Deleted focus", deleted=True),
        _row(DELETED_PARENT, ROOT, title="Deleted parent", deleted=True),
        _row(LIVE_UNDER_DELETED, DELETED_PARENT, title="Live under a deleted parent"),
        _row(LINK_TO_DELETED, ROOT, target=DELETED_PARENT, title=":points at a deleted note"),
        _row(NUL_NOTE, ROOT, title="NUL\x00in the title", details="before\x00after\x00" * 20),
        _row(UNICODE_PARENT, ROOT, title="Unicode " + EMOJI, details=RTL),
        _row(ORDER_PARENT, ROOT, title="Extreme sibling orders"),
    ]
    rows += [_row(i, UNICODE_PARENT, title=t, details=d) for i, (t, d) in UNICODE_TEXTS.items()]
    rows += [_row(i, ORDER_PARENT, order=o) for i, o in EXTREME_ORDERS.items()]
    rows += [_row(ROOT + 50 + k, ROOT, target=CYCLE2[1] if k % 2 else SELF_PARENT) for k in range(4)]
    # the crowd: equal sibling orders in runs of seven, a few negative ones
    for k in range(children):
        order = (k // 7) * 1000 - (10**12 if k % 97 == 0 else 0)
        rows.append(_row(FIRST_CHILD + k, BIG_PARENT, order=order, details="child " * (k % 40)))
    # inbound link notes into TARGET, each under one of the crowd (a few deleted)
    for k in range(inbound):
        rows.append(_row(FIRST_LINK + k, FIRST_CHILD + k, target=TARGET, title=f":refers {k}",
                         deleted=k % 1000 == 999))
    return rows


def foci(children: int, inbound: int) -> dict[str, int]:
    """Focus notes worth computing, by name."""
    return {
        "root": ROOT, "cycle2": CYCLE2[0], "under-cycle": UNDER_CYCLE, "cycle3": CYCLE3[1],
        "self-target": SELF_TARGET, "self-parent": SELF_PARENT,
        "dangling-parent": DANGLING_PARENT, "dangling-target": DANGLING_TARGET,
        "huge-details": HUGE_DETAILS, "under-huge": UNDER_HUGE, "big-parent": BIG_PARENT,
        "first-child": FIRST_CHILD, "middle-child": FIRST_CHILD + children // 2,
        "last-child": FIRST_CHILD + children - 1, "target": TARGET,
        "inbound-link": FIRST_LINK + inbound // 2, "live-under-deleted": LIVE_UNDER_DELETED,
        "link-to-deleted": LINK_TO_DELETED, "nul": NUL_NOTE, "unicode": UNICODE_PARENT,
        "unicode-child": 34, "order-parent": ORDER_PARENT, "extreme-order": 42,
    }
