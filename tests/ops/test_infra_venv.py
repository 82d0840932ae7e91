"""The infra scripts run their Python from the venv ``infra/env.sh`` names: ``RECRAWL_VENV``
when set (a worktree sharing another checkout's venv), else the checkout's ``.venv``."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("script", ["local_s3.sh", "build_artefact.sh"])
def test_infra_scripts_use_the_venv_env_sh_names(tmp_path, script):
    infra = tmp_path / "infra"  # a checkout without a .venv of its own
    infra.mkdir()
    for name in (script, "local_s3.py", "env.sh"):
        shutil.copy(Path(REPO) / "infra" / name, infra / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "RECRAWL_VENV")}
    args = ["bash", str(infra / script)] + (["status", "1"] if script == "local_s3.sh"
                                             else ["--help"])
    missing = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 127 and ".venv/bin/python" in missing.stderr
    env["RECRAWL_VENV"] = sys.prefix
    shared = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert shared.returncode != 127, shared.stderr
    assert ".venv/bin/python: No such file" not in shared.stderr
