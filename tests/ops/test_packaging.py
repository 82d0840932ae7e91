"""The dependency lists agree: pyproject.toml's dependencies and extras (who runs what),
requirements.txt (the test/CI install set, infra/setup.sh) and constraints.txt (the freeze)
pin every package to one version, and the extras together are requirements.txt."""
from __future__ import annotations

import os
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO
from tests.ops.test_layout import FLEET_THIRD_PARTY


def pins(path: str) -> dict[str, str]:
    """name -> pinned version of a requirements-style file (comments and blanks skipped)."""
    out = {}
    for line in open(os.path.join(REPO, path)):
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{path}: {line} is not pinned"
            out[canonicalize_name(req.name)] = spec.version
    return out


def project() -> dict:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]


def groups() -> dict[str, list[Requirement]]:
    meta = project()
    return {"": [Requirement(r) for r in meta["dependencies"]],
            **{extra: [Requirement(r) for r in reqs]
               for extra, reqs in meta["optional-dependencies"].items()}}


def test_the_extras_are_named_by_who_runs_them():
    assert set(groups()) == {"", "fleet", "spark", "airflow", "dev"}


def test_every_pin_in_pyproject_is_the_one_of_requirements_and_constraints():
    requirements, constraints = pins("requirements.txt"), pins("constraints.txt")
    for extra, reqs in groups().items():
        for req in reqs:
            (spec,) = req.specifier
            name = canonicalize_name(req.name)
            assert spec.operator == "==", f"[{extra}] {req} is not pinned"
            assert requirements.get(name) == spec.version, f"[{extra}] {req} vs requirements.txt"
            assert constraints.get(name) == spec.version, f"[{extra}] {req} vs constraints.txt"
    for name, version in requirements.items():
        assert constraints.get(name) == version, f"{name}=={version} vs constraints.txt"


def test_requirements_txt_is_every_extra_together_and_dev_is_everything():
    every = {canonicalize_name(r.name) for reqs in groups().values() for r in reqs}
    assert every == set(pins("requirements.txt"))
    dev_and_base = {canonicalize_name(r.name) for extra in ("", "dev") for r in groups()[extra]}
    assert dev_and_base == every


def test_the_fleet_install_has_no_spark_airflow_or_planner_maths():
    fleet = {canonicalize_name(r.name) for extra in ("", "fleet") for r in groups()[extra]}
    assert not fleet & {"pyspark", "apache-airflow", "scipy", "moto", "pytest"}
    # the layout test's allowed imports for jobs.fleet are exactly what this install brings
    assert fleet == FLEET_THIRD_PARTY - {"botocore"}


def test_the_planner_extras_include_what_the_stages_import():
    for extra in ("spark", "airflow"):
        names = {canonicalize_name(r.name) for r in groups()[extra]}
        assert {"pyspark", "scipy", "boto3"} <= names, extra
    assert {"apache-airflow", "apache-airflow-providers-apache-spark"} <= {
        canonicalize_name(r.name) for r in groups()["airflow"]}
