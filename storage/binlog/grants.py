"""Reading the two kinds of SQL text change capture meets: ``SHOW GRANTS`` lines and logged statements.

Pure text functions (no I/O), kept apart from the replication reader so they can be tested alone.

* :class:`Grants` answers "does this account hold privilege P globally / SELECT on ``db.table``" from
  the lines of ``SHOW GRANTS`` (which on MariaDB also lists the enabled role's and ``PUBLIC``'s
  grants). ``ALL [PRIVILEGES]`` holds every privilege; a database-level grant's name is a LIKE pattern
  (``%``, ``_``, ``\\`` escapes); a column-level ``SELECT (col)`` does not give the whole table.
* :func:`changed_tables` says which watched tables a logged statement changes without row images:
  ``ALTER``/``DROP``/``RENAME``/``CREATE``/``TRUNCATE`` of a table, ``DROP DATABASE`` of ours, and DML
  that was logged as a statement. It errs towards "changed": a false alarm costs one full rebuild, a
  miss would leave stale snapshots. Statements are never returned or logged (they may hold secrets).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Grants", "changed_tables"]

_GRANT = re.compile(
    r"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<routine>(?:FUNCTION|PROCEDURE|PACKAGE(?:\s+BODY)?)\s+)?"
    r"(?P<obj>(?:`(?:[^`]|``)*`|[^\s.`]+)(?:\.(?:`(?:[^`]|``)*`|[^\s.`]+))?)\s+TO\s",
    re.IGNORECASE | re.DOTALL,
)
_NAME_PART = re.compile(r"`((?:[^`]|``)*)`|([^\s.`]+)")
_ALL = "ALL PRIVILEGES"


def _split_privileges(text: str) -> set[str]:
    """Upper-cased privileges at parenthesis depth 0; column-level ones (``SELECT (a)``) are dropped."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    names = {" ".join(p.split()).upper() for p in parts if "(" not in p and p.strip()}
    return {_ALL if n == "ALL" else n for n in names}


def _name_parts(obj: str) -> list[str]:
    return [(q.replace("``", "`") if q or not u else u) for q, u in _NAME_PART.findall(obj)]


def _like(pattern: str) -> re.Pattern[str]:
    """A database-level grant's name as a regex: ``%`` any run, ``_`` one char, ``\\`` escapes."""
    out, escaped = "", False
    for char in pattern:
        if escaped:
            out, escaped = out + re.escape(char), False
        elif char == "\\":
            escaped = True
        else:
            out += {"%": ".*", "_": "."}.get(char, re.escape(char))
    return re.compile(out + r"\Z", re.DOTALL)


@dataclass
class Grants:
    """Privileges by level, parsed from ``SHOW GRANTS`` lines; unknown lines are ignored."""

    global_: set[str] = field(default_factory=set)
    databases: list[tuple[re.Pattern[str], set[str]]] = field(default_factory=list)
    tables: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, lines: Iterable[str]) -> Grants:
        grants = cls()
        for line in lines:
            match = _GRANT.match(line.strip())
            if match is None or match["routine"]:
                continue  # role grants, PROXY, SET DEFAULT ROLE, routine privileges
            grants._add(_name_parts(match["obj"]), _split_privileges(match["privs"]))
        return grants

    def _add(self, parts: list[str], privileges: set[str]) -> None:
        if parts == ["*", "*"]:
            self.global_ |= privileges
        elif len(parts) == 2 and parts[1] == "*":
            self.databases.append((_like(parts[0]), privileges))
        elif len(parts) == 2:
            self.tables.setdefault((parts[0], parts[1]), set()).update(privileges)

    def has_global(self, *names: str) -> bool:
        """Whether any of ``names`` (synonyms of one privilege) or ALL is granted on ``*.*``."""
        return _ALL in self.global_ or any(n in self.global_ for n in names)

    def has_select(self, database: str, table: str) -> bool:
        """SELECT on the whole table, from a global, database-level or table-level grant."""
        wanted = {"SELECT", _ALL}
        if self.global_ & wanted or self.tables.get((database, table), set()) & wanted:
            return True
        return any(p.match(database) and privs & wanted for p, privs in self.databases)


# -- logged statements ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<skip>\s+|--(?:\s[^\n]*)?(?:\n|\Z)|\#[^\n]*|/\*(?!M?!).*?\*/|/\*M?!\d*|\*/)
      | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
      | `(?P<quoted>(?:[^`]|``)*)`
      | (?P<word>[\w$]+)
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
_DDL = frozenset({"ALTER", "DROP", "RENAME", "CREATE", "TRUNCATE"})
_DML = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"})
_SKIP_WORDS = frozenset({"OR", "REPLACE", "TEMPORARY", "ONLINE", "IGNORE", "IF", "NOT", "EXISTS",
                         "UNIQUE", "FULLTEXT", "SPATIAL", "TABLE", "TABLES"})
Name = tuple[str | None, str]  # (database or None for the session's, table)


def _tokens(statement: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word`` upper-cased keyword/identifier, ``id`` back-quoted, ``.``/``,``."""
    out = []
    for match in _TOKEN.finditer(statement):
        if match["skip"] is not None or match["str"] is not None:
            continue
        if match["quoted"] is not None:
            out.append(("id", match["quoted"].replace("``", "`")))
        elif match["word"] is not None:
            out.append(("word", match["word"]))
        else:
            out.append(("sym", match["other"]))
    return out


def _name_at(tokens: list[tuple[str, str]], at: int) -> tuple[Name | None, int]:
    """The (maybe qualified) table name starting at ``at`` and the index after it."""
    if at >= len(tokens) or tokens[at][0] == "sym":
        return None, at
    first = tokens[at][1]
    if at + 2 < len(tokens) and tokens[at + 1] == ("sym", ".") and tokens[at + 2][0] != "sym":
        return (first, tokens[at + 2][1]), at + 3
    return (None, first), at + 1


def _word(tokens: list[tuple[str, str]], at: int) -> str:
    return tokens[at][1].upper() if at < len(tokens) and tokens[at][0] == "word" else ""


def _ddl_names(tokens: list[tuple[str, str]]) -> list[Name]:
    """Tables a DDL statement creates, alters, drops, renames or truncates."""
    at = 1
    while _word(tokens, at) in _SKIP_WORDS - {"TABLE", "TABLES"}:
        at += 1
    target = _word(tokens, at)
    if _word(tokens, 0) == "TRUNCATE":
        at += target in ("TABLE",)
        return [n for n in [_name_at(tokens, at)[0]] if n]
    if target == "INDEX":  # CREATE/DROP INDEX i ON table
        ons = [i for i in range(len(tokens)) if _word(tokens, i) == "ON"]
        return [n for n in [_name_at(tokens, ons[0] + 1)[0] if ons else None] if n]
    if target in ("DATABASE", "SCHEMA") and _word(tokens, 0) == "DROP":
        while _word(tokens, at + 1) in ("IF", "EXISTS", "NOT"):
            at += 1
        name = _name_at(tokens, at + 1)[0]
        return [(name[1], "*")] if name else []
    if target not in ("TABLE", "TABLES"):
        return []  # views, triggers, users, routines...
    return _table_list(tokens, at + 1)


def _table_list(tokens: list[tuple[str, str]], at: int) -> list[Name]:
    """Names after TABLE: a comma list (DROP, RENAME ... TO ...), plus ALTER ... RENAME [TO|AS] x."""
    names: list[Name] = []
    while _word(tokens, at) in _SKIP_WORDS:
        at += 1
    verb = _word(tokens, 0)
    while True:
        name, at = _name_at(tokens, at)
        if name is None:
            break
        names.append(name)
        if verb == "RENAME" and _word(tokens, at) == "TO":
            at += 1
            continue
        if at < len(tokens) and tokens[at] == ("sym", ",") and verb in ("DROP", "RENAME"):
            at += 1
            continue
        break
    for i in range(at, len(tokens)):
        if verb == "ALTER" and _word(tokens, i) == "RENAME":
            skip = 1 + (_word(tokens, i + 1) in ("TO", "AS"))
            renamed = _name_at(tokens, i + skip)[0]
            if renamed and _word(tokens, i + 1) not in ("COLUMN", "INDEX", "KEY"):
                names.append(renamed)
    return names


def _all_names(tokens: list[tuple[str, str]]) -> list[Name]:
    """Every identifier as a possible table name (DML: any mention counts)."""
    names: list[Name] = []
    at = 0
    while at < len(tokens):
        name, after = _name_at(tokens, at)
        if name is not None:
            names.append(name)
        at = after if name is not None and name[0] is not None else at + 1
    return names


def changed_tables(
    statement: str, session_schema: str, database: str, watched: Iterable[str]
) -> tuple[tuple[str, ...], str] | None:
    """(watched tables, statement kind) a logged statement changes without row images, or None.

    A name without a database means the session's (``session_schema``). Names compare without case,
    as a false alarm is cheaper than a miss.
    """
    tokens = _tokens(statement)
    verb = _word(tokens, 0)
    if verb in _DDL:
        names = _ddl_names(tokens)
    elif verb in _DML:
        names, verb = _all_names(tokens), "STATEMENT"
    else:
        return None
    wanted = {w.lower(): w for w in watched}
    hit: set[str] = set()
    for db, table in names:
        if (db or session_schema).lower() != database.lower():
            continue
        if table == "*":
            hit |= set(wanted.values())
        elif table.lower() in wanted:
            hit.add(wanted[table.lower()])
    return (tuple(sorted(hit)), verb) if hit else None
