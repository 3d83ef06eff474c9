"""README's "Command line" and ``graphrag --help`` agree.

Every command README shows exists and every command is shown, with exactly its options; a choice
README spells out is the command's, a default it shows is the command's; the options README marks
"with --live" are the ones the command refuses without it; the default seed and the tokenLimit
range read the same in both, and the command line behaves as they say.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner

from graphrag import InvalidParameter
from graphrag.core.params import MAX_TOKEN_LIMIT_CEILING
from service.answers import parse_ask
from storage.profiles.sample_2026 import SAMPLE_2026_FOCUS_IDS
from tests.deployment_support import ROOT
from worker.cli.main import main

METAVAR = re.compile(r"[A-Z][A-Z0-9_.-]*")


@dataclass
class Usage:
    """One command line README shows: the command, each option with the word after it, and the
    options on a line whose comment says "with --live"."""

    command: tuple[str, ...]
    options: dict[str, str | None] = field(default_factory=dict)
    live_only: set[str] = field(default_factory=set)


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]


def prose() -> str:
    """The section as one line of text, without backticks."""
    return " ".join(section().replace("`", "").split())


def _command(words: list[str]) -> tuple[tuple[str, ...], click.Command]:
    path, command = [], main
    while isinstance(command, click.Group) and words and words[0] in command.commands:
        path.append(words.pop(0))
        command = command.commands[path[-1]]
    return tuple(path), command


def _read(usage: Usage, command: click.Command, code: str, comment: str) -> None:
    params = {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}
    words = re.findall(r"[^\s\[\]()]+", code)
    for at, word in enumerate(words):
        if word.startswith("--"):
            follows = words[at + 1] if at + 1 < len(words) else None
            flag = word in params and params[word].is_flag
            usage.options[word] = None if flag or not follows or follows.startswith("--") else follows
            if "with --live" in comment and word != "--live":
                usage.live_only.add(word)


def usages() -> list[Usage]:
    """Every ``graphrag ...`` entry of the section's shell blocks, continuation lines included."""
    found: list[tuple[Usage, click.Command]] = []
    for shell in re.findall(r"```sh\n(.*?)```", section(), re.DOTALL):
        for line in shell.splitlines():
            code, _, comment = line.partition(" #")
            if code.startswith("graphrag "):
                path, command = _command(code.split()[1:])
                found.append((Usage(path), command))
                code = code.split(None, 1 + len(path))[-1]
            if code.strip() and not code.lstrip().startswith("#") and found:
                _read(*found[-1], code, comment)
    return [usage for usage, _ in found]


Commands = dict[tuple[str, ...], click.Command]


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Commands:
    out: Commands = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out |= commands(command, (*path, name))
        else:
            out[(*path, name)] = command
    return out


def options(command: click.Command) -> dict[str, click.Option]:
    return {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}


def shown(command: tuple[str, ...]) -> dict[str, str | None]:
    """The options README shows for ``command``, over all its lines."""
    return {o: v for u in usages() if u.command == command for o, v in u.options.items()}


def help_text(*command: str) -> str:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_readme_shows_every_command_and_only_commands() -> None:
    assert {u.command for u in usages()} == set(commands())


@pytest.mark.parametrize("command", sorted(commands()), ids=" ".join)
def test_readme_shows_exactly_the_commands_options(command: tuple[str, ...]) -> None:
    wanted = set(options(commands()[command])) - {"--help"}
    assert set(shown(command)) == wanted, f"graphrag {' '.join(command)}"


@pytest.mark.parametrize("command", sorted(commands()), ids=" ".join)
def test_choices_and_defaults_are_the_commands(command: tuple[str, ...]) -> None:
    params = options(commands()[command])
    for name, value in shown(command).items():
        param = params[name]
        if value is None or value == "..." or METAVAR.fullmatch(value):
            continue
        if isinstance(param.type, click.Choice):
            assert set(value.split("|")) == set(param.type.choices), name
        elif param.default is not None:
            assert value == str(param.default), name


def test_the_options_readme_says_need_live_are_those_the_command_refuses() -> None:
    marked = {o for u in usages() if u.command == ("context",) for o in u.live_only}
    params = options(commands()[("context",)])
    helped = {o for o, p in params.items() if (p.help or "").startswith("With --live")}
    assert marked == helped == {"--max-depth", "--now"}
    for name, value in (("--max-depth", "1"), ("--now", "2026-01-01T00:00:00Z")):
        refused = CliRunner().invoke(main, ["context", "1", name, value])
        assert refused.exit_code == 2 and "applies to --live only" in refused.output, name


def test_the_default_seed_reads_the_same() -> None:
    fragment = "one of GRAPHRAG_SEEDS (with --live, the first)"
    assert "seedless order" in help_text("context") and fragment in help_text("context")
    assert "without --seed is Doughnut's seedless order" in prose() and fragment in prose()


def test_the_token_limit_range_is_the_services_own() -> None:
    param = options(commands()[("context",)])["--token-limit"]
    assert isinstance(param.type, click.IntRange)
    assert (param.type.min, param.type.max) == (1, MAX_TOKEN_LIMIT_CEILING)
    for bad in (0, MAX_TOKEN_LIMIT_CEILING + 1):
        with pytest.raises(InvalidParameter):
            parse_ask(1, strategy="focus-context", token_limit=bad, seed=None, viewer=None,
                      fmt="json", seeds=(0,), max_token_limit=5000)
    assert f"--token-limit takes 1 to {MAX_TOKEN_LIMIT_CEILING:,}" in prose()
    assert f"[1<=x<={MAX_TOKEN_LIMIT_CEILING}]" in help_text("context")


# -- what the command line does, on today's Doughnut ------------------------------------------------
def graphrag(*args: str) -> bytes:
    code = "from worker.cli.main import main; main()"
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    return run.stdout


@pytest.fixture(scope="module")
def wiki_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('cli-2026')) / 'sample.db'}"
    graphrag("db", "load-sample", "--schema", "doughnut-2026", "--db", url)
    return url


def test_without_a_seed_todays_doughnut_is_read_seedless(wiki_db: str) -> None:
    note = str(SAMPLE_2026_FOCUS_IDS["big_folder_note"])  # 300+ peers: a seed samples them
    seedless = graphrag("context", note, "--live", "--db", wiki_db)
    assert seedless != graphrag("context", note, "--live", "--db", wiki_db, "--seed", "0")
    assert seedless == graphrag("context", note, "--live", "--db", wiki_db, "--max-depth", "2")


def test_max_depth_is_honoured_with_live(wiki_db: str) -> None:
    note = str(SAMPLE_2026_FOCUS_IDS["hub"])
    deep = orjson.loads(graphrag("context", note, "--live", "--db", wiki_db))
    shallow = orjson.loads(graphrag("context", note, "--live", "--db", wiki_db, "--max-depth", "0"))
    assert len(shallow["relatedNotes"]) < len(deep["relatedNotes"])
