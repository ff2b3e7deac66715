"""The house's directions, checked from the sources: config → methods → backends → hot_kernels, one CLI convention,
and light top-level commands."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from hot.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "hot"


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved against its package)."""
    inside = path.is_relative_to(SRC.parent)
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1]) if inside else path.parent.name
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            else:
                found.add(node.module or "")
    return found


def _top(name: str) -> str:
    return name.split(".")[0]


def test_only_the_real_backend_imports_the_compiled_ops() -> None:
    importers = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if any(_top(m) == "hot_kernels" for m in _imports(p))
    )
    assert importers == ["backends/real.py"]


def test_nothing_under_kernels_imports_hot() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "kernels").rglob("*.py")
        if "build" not in p.parts and any(_top(m) == "hot" for m in _imports(p))
    ]
    assert offenders == []


def test_config_and_methods_never_import_upwards() -> None:
    """config knows no methods or backends; backends know no methods; the ops know no layer classes; no layer below
    imports the CLI or commands."""
    rules = {
        SRC / "config.py": ("hot.methods", "hot.backends", "hot.modules", "hot.functional"),
        SRC / "backends": ("hot.methods", "hot.modules", "hot.functional", "hot.convert"),
        SRC / "methods.py": ("hot.modules", "hot.functional", "hot.convert"),
        # the ops know layers by a protocol and a handle: the layer classes import the ops, not the reverse
        SRC / "functional.py": ("hot.modules", "hot.convert"),
    }
    for where, forbidden in rules.items():
        for path in [where] if where.is_file() else sorted(where.rglob("*.py")):
            bad = sorted(m for m in _imports(path) if m.startswith(forbidden))
            assert bad == [], f"{path.relative_to(SRC)} imports {bad}"
    for path in SRC.rglob("*.py"):
        if "commands" in path.parts or path.name == "cli.py":
            continue
        bad = sorted(m for m in _imports(path) if m.startswith(("hot.commands", "hot.cli", "argparse")))
        assert bad == [], f"{path.relative_to(SRC)} imports {bad}: argument parsing belongs to hot.commands"


def test_every_command_is_a_module_of_hot_commands() -> None:
    for name in COMMANDS:
        path = SRC / "commands" / f"{name}.py"
        assert path.is_file(), f"hot {name}: no {path.relative_to(ROOT)}"
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert {"add_arguments", "run"} <= defined, f"hot {name} defines {sorted(defined)}"
    commands = {p.stem for p in (SRC / "commands").glob("*.py") if not p.stem.startswith("_")}
    assert commands == set(COMMANDS)


def test_help_and_info_import_neither_timm_nor_torchvision() -> None:
    for argv in (["--help"], ["info"]):
        code = (
            "import sys\nfrom hot.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in ('timm', 'torchvision') if m in sys.modules))"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert result.stdout.strip().splitlines()[-1] == "LOADED []", argv


def test_import_hot_and_hot_slots_load_no_torch() -> None:
    """``hot slots`` wraps every training job of the workflow: its start must not pay for torch's import."""
    code = (
        "import sys\nimport hot\nimport hot.gpu_slots\nfrom hot.cli import main\n"
        "try:\n    main(['slots', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('torch', 'numpy', 'timm') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "LOADED []"


def test_every_public_name_of_hot_resolves_to_its_definition() -> None:
    """In a fresh process: the module ``hot.convert`` imported first, ``hot.convert`` is still the function; every
    public name is its defining module's; submodules are reachable from ``import hot`` alone; unknown names fail."""
    code = """
import importlib
import hot
for name in ("backends", "rounding", "lqs"):  # before anything else loads them
    assert getattr(hot, name) is importlib.import_module(f"hot.{name}"), name
importlib.import_module("hot.convert")
assert callable(hot.convert) and hot.convert.__module__ == "hot.convert"
for name in hot.__all__:
    value = getattr(hot, name)
    home = "hot.lqs" if name == "lqs" else f"hot.{hot._EXPORTS[name]}"
    assert value is (importlib.import_module(home) if name == "lqs" else getattr(importlib.import_module(home), name))
assert set(hot.__all__) <= set(dir(hot)) and "importlib" not in dir(hot)
try:
    hot.not_a_name
except AttributeError as err:
    assert "has no attribute 'not_a_name'" in str(err)
else:
    raise AssertionError("hot.not_a_name resolved")
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
