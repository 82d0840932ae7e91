"""What ships: the wheel and the cluster artefact hold the product (``jobs``) and nothing of
the lab (simulator, backtest, studies, sample generator, demo)."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from jobs import artefact
from tests.conftest import REPO

LAB = Path(REPO) / "lab"
PRODUCT = sorted(p.relative_to(REPO).as_posix() for p in (Path(REPO) / "jobs").rglob("*.py")
                 if "__pycache__" not in p.parts)


def _python_files(names):
    return sorted(n for n in names if n.endswith(".py"))


def test_the_cluster_artefact_holds_the_product_and_no_lab_module(tmp_path):
    built = artefact.build(str(tmp_path))
    names = zipfile.ZipFile(built["zip"]).namelist()
    assert _python_files(names) == PRODUCT
    assert not [n for n in names if n.startswith("lab/") or "/sim/" in n or "/backtest/" in n
                or "/studies/" in n or "/tools/" in n]


def test_the_wheel_holds_the_product_and_no_lab_module(tmp_path):
    # Built as a release would be: pip fetches the build backend pyproject.toml names.
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                          "-q", "-w", str(tmp_path), str(REPO)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel, = tmp_path.glob("recrawl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert _python_files(n for n in names if not n.startswith("recrawl-")) == PRODUCT
    assert not [n for n in names if n.startswith("lab/")]
    assert LAB.is_dir() and any(LAB.rglob("*.py"))  # the lab exists; it just does not ship


def test_an_artefact_out_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    out = subprocess.run([sys.executable, "-m", "jobs.artefact", "--out",
                          str(tmp_path / "a-file" / "dist")], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"artefact.py: error: OutputError: --out "
                                       f"{tmp_path / 'a-file' / 'dist'}: cannot be written: "
                                       f"Not a directory"]
