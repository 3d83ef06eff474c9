"""README's configuration tables are generated from the settings class and the compose file.

The settings table is :class:`worker.settings.Settings` with :mod:`worker.settings_meanings`; the
compose-only table is :data:`ops.settings_doc.COMPOSE_ONLY` with docker-compose.yml's defaults. A
test regenerates both and compares them with README (``make docs`` writes them), and every
``${VAR}`` of docker-compose.yml must be named by one of them.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from ops.docgen import block, differences, regenerate
from ops.settings_doc import COMPOSE_FILE, COMPOSE_ONLY, env_names, interpolations
from tests.deployment_support import ROOT
from worker.settings import Settings
from worker.settings_meanings import DEFAULTS_SHOWN, MEANINGS

README = ROOT / "README.md"
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def compose_variables() -> set[str]:
    """Every variable docker-compose.yml interpolates (nested ones too; ``$$`` is no variable), read
    from the parsed file so that comments are left out."""
    parsed = json.dumps(yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8")))
    return set(VARIABLE.findall(parsed.replace("$$", "")))


def setting_variables() -> set[str]:
    return {n for name, field in Settings.model_fields.items() for n in env_names(name, field)}


def test_readme_shows_the_generated_configuration_tables() -> None:
    found = [d for d in differences("README.md") if "[settings]" in d or "[compose-settings]" in d]
    assert not found, "README's tables differ from the settings (run `make docs`):\n" + "\n".join(found)


def test_a_difference_is_named_by_its_row() -> None:
    text = README.read_text(encoding="utf-8")
    tampered = text.replace("| `GRAPHRAG_IN_CHUNK` | `100` |", "| `GRAPHRAG_IN_CHUNK` | `99` |")
    found = "\n".join(differences("README.md", tampered))
    assert "README.md [settings]" in found
    assert "-| `GRAPHRAG_IN_CHUNK` | `99` |" in found and "+| `GRAPHRAG_IN_CHUNK` | `100` |" in found


def test_every_field_has_a_meaning_and_every_meaning_a_field() -> None:
    fields = list(Settings.model_fields)
    assert list(MEANINGS) == fields, "worker/settings_meanings.py: one meaning per field, in order"
    assert set(DEFAULTS_SHOWN) <= {n for n, f in Settings.model_fields.items() if f.default is None}


def test_aliases_are_named_by_their_environment_variables() -> None:
    table = block(README.read_text(encoding="utf-8"), "settings")
    assert "| `GRAPHRAG_SCHEMA` | `auto` |" in table
    assert "| `CELERY_BROKER_URL` (or `GRAPHRAG_BROKER_URL`) |" in table
    assert "GRAPHRAG_SCHEMA_NAME" not in table


def test_every_compose_variable_is_in_one_table() -> None:
    compose_only = {name for name, _ in COMPOSE_ONLY}
    missing = compose_variables() - setting_variables() - compose_only
    assert not missing, f"docker-compose.yml uses {sorted(missing)}: add them to ops/settings_doc.py"


def test_compose_only_variables_are_used_by_compose_and_not_settings() -> None:
    compose_only = [name for name, _ in COMPOSE_ONLY]
    assert len(set(compose_only)) == len(compose_only)
    assert not set(compose_only) - compose_variables(), "a compose-only variable compose no longer uses"
    assert not set(compose_only) & setting_variables(), "a setting belongs in the settings table"


def test_compose_defaults_are_read_as_compose_reads_them() -> None:
    text = "${A:-mysql://root:${B:-pw}@db/x} ${C:?set C} $${D} ${E}"
    assert list(interpolations(text)) == [("A", ":-", "mysql://root:${B:-pw}@db/x"), ("B", ":-", "pw"),
                                          ("C", ":?", "set C"), ("E", "", "")]
    table = block(README.read_text(encoding="utf-8"), "compose-settings")
    assert "| `FLOWER_BASIC_AUTH` | required |" in table


def test_a_block_inside_a_list_item_keeps_its_indentation() -> None:
    text = "- item:\n\n  <!-- settings:begin x -->\n  old\n  <!-- settings:end -->\n"
    lines = regenerate(text, ["settings"]).splitlines()
    assert lines[3] == "  | variable | default | meaning |"
    assert all(line.startswith("  ") for line in lines[2:])


def test_a_missing_marker_names_the_document_and_the_block() -> None:
    with pytest.raises(ValueError, match=r"README.md: needs one '<!-- settings:begin"):
        regenerate("no markers", ["settings"], "README.md")
