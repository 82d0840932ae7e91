"""The package layout's import rules (jobs/__init__.py says them in prose; this is the table).

Every import in every module of ``jobs`` is read with :mod:`ast`, function-local ones
included, so a rule cannot be dodged by importing late.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"
LAB = REPO / "lab"

# The DAG's stages: none may import another (what two share lives in a shared module).
STAGES = {"jobs.validate_logs", "jobs.update_state", "jobs.allocate", "jobs.build_schedule",
          "jobs.publish", "jobs.verify"}

# package -> packages/modules (by prefix) its modules may import from jobs and lab.
ALLOWED = {
    "jobs.core": ("jobs.core",),
    "jobs.fleet": ("jobs.fleet", "jobs.core.hosts", "jobs.core.http_fields", "jobs.schemas"),
    "lab.sim": ("lab.sim", "jobs.schemas", "jobs.fleet"),
}
# package -> packages its modules must never import. The product (every jobs package) never
# imports the lab.
FORBIDDEN = {
    "jobs": ("lab",),
    "jobs.core": ("lab",),
    "jobs.fleet": ("lab",),
    "lab.backtest": ("lab.studies",),
    "lab.tools": ("lab.studies",),
}
NO_PYSPARK = ("jobs.core", "jobs.fleet", "lab.sim")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            # `from jobs import allocate` imports the module jobs.allocate
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): imports_of(p)
           for root in (JOBS, LAB) for p in sorted(root.rglob("*.py"))}


def package_of(module: str) -> str:
    parts = module.split(".")
    sub = ".".join(parts[:2])
    return sub if len(parts) >= 2 and (REPO / parts[0] / parts[1]).is_dir() else parts[0]


def under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def real_jobs_modules(imported: set[str]) -> set[str]:
    """The jobs and lab modules/packages actually named (``from jobs import x`` adds jobs.x)."""
    return {m for m in imported if m.startswith(("jobs.", "lab.")) or m == "lab"
            if m in MODULES or under(m, MODULES) or m == "lab"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_follow_the_layout(module):
    package = package_of(module)
    imported = real_jobs_modules(MODULES[module])
    problems = []
    if package in ALLOWED:
        problems += [m for m in imported if not under(m, ALLOWED[package])]
    problems += [m for m in imported if under(m, FORBIDDEN.get(package, ()))]
    if module in STAGES:
        problems += [m for m in imported if m in STAGES and m != module]
    # Production code never leans on test code (the backtest's S3 server is lab.sim's).
    problems += [m for m in MODULES[module] if under(m, ("tests",))]
    if under(module, NO_PYSPARK):
        problems += [m for m in MODULES[module] if under(m, ("pyspark",))]
    assert not problems, f"{module} ({package}) may not import {sorted(set(problems))}"


def test_every_package_says_what_lives_there_and_who_may_import_it():
    for init in [*JOBS.rglob("__init__.py"), *LAB.rglob("__init__.py")]:
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc.lower(), f"{init} needs a docstring naming what may import it"


def test_the_rules_catch_a_stage_importing_a_stage(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from jobs import allocate\n")
    assert "jobs.allocate" in real_jobs_modules(imports_of(bad))


def test_the_rules_catch_the_product_importing_the_lab(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from lab.sim import WebParams\n    import lab\n")
    found = real_jobs_modules(imports_of(bad))
    assert "lab.sim" in found and "lab" in found
    assert [m for m in found if under(m, FORBIDDEN["jobs"])]


def test_product_modules_are_only_in_jobs_and_the_lab_has_no_stage():
    assert not any(m.startswith("jobs.") and under(m, ("jobs.sim", "jobs.backtest", "jobs.studies",
                                                      "jobs.tools")) for m in MODULES)
    assert {"lab.sim", "lab.backtest", "lab.studies", "lab.tools"} <= set(MODULES)


# ----- the fleet SDK installs alone; the product imports no path hack ----------------------
# What jobs.fleet may reach besides itself: the contracts and the URL/header grammar it shares
# with the planner, the errors module (stdlib only: the contracts' SchemaError lives there), and
# jobs.storage (pyarrow.fs only), which the contracts' footer check
# (schemas.check_files, the planner's) imports inside the function.
FLEET_SHARED = ("jobs", "jobs.core", "jobs.schemas", "jobs.core.hosts", "jobs.core.http_fields",
                "jobs.storage", "jobs.errors", "jobs.core.budget_factors")
# Third-party imports (top-level names) of the fleet's install, `recrawl[fleet]`: the base
# dependencies and the fleet extra (tests/ops/test_packaging.py checks they are those of
# pyproject.toml); botocore comes with boto3.
FLEET_THIRD_PARTY = {"numpy", "pandas", "pyarrow", "boto3", "botocore", "resiliparse"}
LAB_PACKAGES = ("lab",)


def fleet_closure() -> set[str]:
    """Every jobs module that importing the jobs.fleet modules imports, transitively."""
    todo = [m for m in MODULES if under(m, ("jobs.fleet",))]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]
        todo += [m for m in real_jobs_modules(MODULES[module]) if m in MODULES]
    return seen


def test_the_fleet_reaches_only_itself_the_contracts_and_the_grammar():
    outside = sorted(m for m in fleet_closure() if not under(m, ("jobs.fleet",))
                     and m not in FLEET_SHARED)
    assert not outside, f"jobs.fleet imports {outside}: the fleet's install would need them"


def test_the_fleet_imports_only_the_stdlib_and_its_extras_packages():
    import sys

    problems = {}
    for module in fleet_closure():
        third = {m.split(".")[0] for m in MODULES[module]} - set(sys.stdlib_module_names)
        third -= {"jobs", "__future__"} | FLEET_THIRD_PARTY
        if third:
            problems[module] = sorted(third)
    assert not problems, f"not installed by recrawl[fleet]: {problems}"


def test_no_product_module_or_dag_edits_sys_path():
    files = [p for p in JOBS.rglob("*.py") if not under(module_name(p), LAB_PACKAGES)]
    files += sorted((JOBS.parent / "dags").glob("*.py"))
    pattern = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\b|\[[^\]]*\]\s*=|\s*[+]?=)")
    hacks = [f"{p.relative_to(JOBS.parent)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hacks, f"the package is installed (or shipped as the artefact): {hacks}"


def test_product_modules_carry_no_history():
    """Docstrings and comments say what and why; which issue or run led there is git's."""
    files = [p for p in JOBS.rglob("*.py") if not under(module_name(p), LAB_PACKAGES)]
    files += sorted((JOBS.parent / "dags").glob("*.py"))
    pattern = re.compile(r"\bissue \d+|\bUntil 20\d\d-|docs/(backtest|benchmarks)\.md", re.I)
    found = [f"{p.relative_to(JOBS.parent)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found
