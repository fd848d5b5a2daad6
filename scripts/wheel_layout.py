"""The wheel's layout: everything under one `pi_authorizer` package, so nothing claims `core` or `tui`.

The checkout keeps `core/` and `tui/` at its top (the layout every doc and test names); an installed
tool must not put packages with such common names into site-packages, where another project's `core`
would clash. So the standard wheel is built from a copy in which `core` becomes `pi_authorizer.core`
and `tui` becomes `pi_authorizer.tui`: every absolute import of the two is rewritten (the only way
the code names its own modules; `tests/test_packaging.py` imports every module of the built wheel
and fails if one still reaches a top-level `core` or `tui`). An editable install (`uv sync`) maps
the checkout instead: its `pi_authorizer` package's path is the checkout, beside `core` and `tui`.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "pi_authorizer"
ROOTS = ("core", "tui")
SHIPPED_SUFFIXES = {".py", ".tcss"}
#: `from core.x import y`, `import tui.z`: the two roots, as whole names at the start of a statement.
IMPORT = re.compile(r"^(\s*)(from|import)(\s+)(core|tui)(?=[\s.])", re.MULTILINE)
INIT = '"""pi-authorizer: a side-terminal authorizer for pi\'s forwarded permission asks."""\n'
EDITABLE_INIT = (
    '"""pi-authorizer from a source checkout: `pi_authorizer.core` and `pi_authorizer.tui` are the\n'
    'checkout\'s own `core/` and `tui/` (an editable install; a built wheel holds real copies)."""\n\n'
    "__path__ = [{root!r}]\n"
)


def rewritten(source: str) -> str:
    """`source` with each import of `core`/`tui` made an import of `pi_authorizer.core`/`.tui`."""
    return IMPORT.sub(lambda m: f"{m[1]}{m[2]}{m[3]}{PACKAGE}.{m[4]}", source)


class LayoutHook(BuildHookInterface):  # type: ignore[type-arg]
    """Builds the `pi_authorizer` tree in a temporary folder and includes it in the wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._staging = Path(tempfile.mkdtemp(prefix="pi-authorizer-wheel-"))
        package = self._staging / PACKAGE
        package.mkdir()
        if version == "editable":
            (package / "__init__.py").write_text(EDITABLE_INIT.format(root=self.root), encoding="utf-8")
        else:
            (package / "__init__.py").write_text(INIT, encoding="utf-8")
            for root in ROOTS:
                for source in sorted(Path(self.root, root).rglob("*")):
                    if source.suffix not in SHIPPED_SUFFIXES or "__pycache__" in source.parts:
                        continue
                    target = package / source.relative_to(self.root)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    text = source.read_text(encoding="utf-8")
                    target.write_text(rewritten(text) if source.suffix == ".py" else text, encoding="utf-8")
            (package / "py.typed").write_text("", encoding="utf-8")
        included = "force_include_editable" if version == "editable" else "force_include"
        build_data[included][str(package)] = PACKAGE

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
