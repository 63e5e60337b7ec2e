"""House rule: a test module imports no other test module; what tests share lives in tests/support/.

A test module imported by another runs its module-level set-up twice under two names, couples two
files that pytest collects on their own, and hides a helper where nobody looks for one. Import
strings count too (`"tests.x.test_y:plugin"` handed to the plugin loader imports the module).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# A dotted module path of a test module, in an import or in a string ("module:attribute" or bare).
TEST_MODULE = re.compile(r"^tests(?:\.\w+)*\.test_\w+$")
IMPORT_STRING = re.compile(r"\btests(?:\.\w+)*\.test_\w+\b")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_test_modules(source: str, *, own: str) -> set[str]:
    """Test modules `source` imports, by statement or by an import string, the module `own` excepted."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(IMPORT_STRING.findall(node.value))
    return {name for name in found if TEST_MODULE.match(name)} - {own}


def test_no_test_module_imports_another_test_module() -> None:
    offenders = {}
    # This file names test modules as the control's data, never to import them.
    for path in sorted(set(TESTS.rglob("*.py")) - {Path(__file__).resolve()}):
        imported = imported_test_modules(path.read_text(encoding="utf-8"), own=module_name(path))
        if imported:
            offenders[module_name(path)] = sorted(imported)
    assert offenders == {}, "move what they share into tests/support/"


def test_the_check_sees_statements_and_import_strings_but_not_a_module_naming_itself() -> None:
    """The control for the check above."""
    source = (
        "import tests.store.test_base\n"
        "from tests.deploy.test_chart import helm\n"
        "from tests.deploy import test_monitoring\n"
        'PLUGIN = "tests.plugin_host.test_loader:first_plugin"\n'
        'SELF = "tests.plugins.test_probe:plugin"\n'
        "from tests.support.chart import render\n"
    )
    assert imported_test_modules(source, own="tests.plugins.test_probe") == {
        "tests.store.test_base",
        "tests.deploy.test_chart",
        "tests.deploy.test_monitoring",
        "tests.plugin_host.test_loader",
    }
