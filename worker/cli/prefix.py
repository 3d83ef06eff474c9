"""``graphrag prefix``: which database a key prefix belongs to, and taking it over (service.binding).

``status`` names the database the prefix is bound to and this one; ``take-over`` deletes what the
prefix holds (another database's snapshots, its reverse index, its dirty set, change capture's
position in the other database's log), binds it to this database and hands a full rebuild to the
workers, or, with ``--here``, runs it in this process.
"""

from __future__ import annotations

import click

from service.binding import take_over
from worker.cli.commands import queue_full_rebuild, rebuild_here
from worker.compose import Wiring
from worker.settings import load_settings

__all__ = ["print_binding", "take_prefix_over"]


def print_binding(database_url: str | None) -> None:
    wiring = Wiring(load_settings(database_url=database_url))
    bound, mine = wiring.binding.bound(), wiring.source.identity()
    click.echo(f"prefix {wiring.keys.prefix!r}: {bound or 'bound to no database yet'}")
    click.echo(f"this database: {mine}" + ("" if bound is None or bound == mine
                                            else " (another: `graphrag prefix take-over`)"))


def take_prefix_over(database_url: str | None, *, here: bool) -> None:
    wiring = Wiring(load_settings(database_url=database_url))
    wiring.source.check()
    before, mine = wiring.binding.bound(), wiring.source.identity()
    deleted = take_over(wiring.binding, mine)
    click.echo(f"prefix {wiring.keys.prefix!r} taken over from {before or 'no database'}: "
               f"{deleted} keys deleted, now {mine}", err=True)
    if here:
        rebuild_here(database_url, (), everything=True)
    else:
        queue_full_rebuild(database_url)
