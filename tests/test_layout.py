"""The package's structure, read from its source with ``ast``: which part imports which, no
private names across modules or from scikit-learn, and the size limit of functions (100 lines; classes
have none: a class is as long as its concept, not cut into one-user mixins).

The layers, bottom up (a part imports only parts below it, and its own modules)::

    _utils, _validation        generators, devices, dtypes, the memory budget; parameter checks
    distributed, datasets      beside the bottom: they import only _utils and _validation
    masks                      samplers and the parser of mask rates
    models                     the MaskedModel contract and the models
    objectives                 training objectives, scoring, curves
    estimators, text           scikit-learn estimators; masked LMs (predictors, strategies, the runner)
    testing, cli               conformance checks of models and predictors; commands, on the public API
"""

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[1] / "skmpt"

LAYERS = {
    "_utils": 0,
    "_validation": 0,
    "distributed": 1,
    "datasets": 1,
    "masks": 2,
    "models": 3,
    "objectives": 4,
    "estimators": 5,
    "text": 5,
    "testing": 6,
    "cli": 6,
    "__init__": 7,
    "__main__": 7,
}
#: Imports a part may make beyond the layers below it (none), and those it must never make.
FORBIDDEN = {
    "distributed": {"masks", "models", "objectives", "estimators", "text", "testing", "datasets", "cli"},
    "datasets": {"masks", "models", "objectives", "estimators", "text", "testing", "distributed", "cli"},
    "text": {"estimators", "testing", "cli"},
    "testing": {"cli"},
    "cli": {"testing"},
    "estimators": {"text", "testing", "cli"},
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts), path.name == "__init__.py"


def _imports(path, module, is_package):
    """``(imported module, names)`` for every import of the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield node.lineno, target, [alias.name for alias in node.names]


def _part(module):
    """The layer a module of skmpt belongs to: ``skmpt.models.vae`` -> ``models``."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _all_imports():
    for path, module, is_package in _modules():
        for line, target, names in _imports(path, module, is_package):
            yield path, module, line, target, names


def test_no_private_names_across_modules():
    problems = []
    for path, module, line, target, names in _all_imports():
        if target.split(".")[0] != "skmpt" or target == module:
            continue
        for name in names:
            private = name.startswith("_") and not name.startswith("__")
            allowed = name.startswith("_Base") or name.endswith("Mixin")
            if private and not allowed:
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} from {target}")
    assert not problems, "\n".join(problems)


def test_no_private_scikit_learn_names():
    problems = []
    for path, _, line, target, names in _all_imports():
        if target.split(".")[0] != "sklearn":
            continue
        private_module = any(part.startswith("_") for part in target.split("."))
        private_names = [name for name in names if name.startswith("_")]
        if private_module or private_names:
            problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} {private_names}")
    assert not problems, "\n".join(problems)


def test_imports_go_down_the_layers():
    problems = []
    for path, module, line, target, names in _all_imports():
        if target.split(".")[0] != "skmpt":
            continue
        source = _part(module)
        # "from .. import objectives" names the part in the imported names.
        targets = [_part(f"{target}.{name}") for name in names] if target == "skmpt" else [_part(target)]
        for imported in targets:
            if imported not in LAYERS or imported == source:
                continue
            if LAYERS[imported] >= LAYERS[source] or imported in FORBIDDEN.get(source, ()):
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {imported}")
    assert not problems, "\n".join(problems)


def _definitions():
    for path, _, _ in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path, node


def test_function_size_limit(limit=100):
    too_long = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for path, node in _definitions()
        if node.end_lineno - node.lineno + 1 > limit
    ]
    assert not too_long, "\n".join(too_long)


def test_one_memory_budget():
    """Chunk sizes come from skmpt.working_memory: no bare power-of-two memory literal elsewhere."""
    literals = []
    for path, _, _ in _modules():
        if path.name == "_utils.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Pow)
                and isinstance(node.left, ast.Constant)
                and node.left.value == 2
                and isinstance(node.right, ast.Constant)
                and 20 <= node.right.value <= 30
            ):
                literals.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: 2**{node.right.value}")
    assert not literals, "\n".join(literals)


def test_no_merge_conflict_markers():
    """No file of the source tree keeps a line that git writes around a merge conflict."""
    root = PACKAGE.parent
    suffixes = {".py", ".rst", ".md", ".toml", ".cfg", ".txt", ".csv"}
    folders = [root / name for name in ("skmpt", "tests", "docs", "examples", "benchmarks")]
    paths = [root / name for name in ("README.md", "CHANGELOG.md", "pyproject.toml")]
    paths += [path for folder in folders for path in folder.rglob("*")
              if path.suffix in suffixes and "_build" not in path.parts and "auto_examples" not in path.parts]
    markers = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")):  # a bare ======= may be an rst underline
                markers.append(f"{path.relative_to(root)}:{number}: {line}")
    assert not markers, "\n".join(markers)
