"""The command line every daily stage shares: ``--date D`` plus config overrides."""
from __future__ import annotations

import argparse
import json
from typing import Callable

from jobs.config import Config, add_config_args, config_from_args


def stage_main(run: Callable[[Config, str], dict], doc: str, argv=None) -> int:
    """Parse ``--date``/``--config``/``--set``, run the stage, print its run record."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--date", required=True, help="logical date D (YYYY-MM-DD)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    print(json.dumps(run(config_from_args(args), args.date), indent=2, sort_keys=True,
                     default=str))
    return 0
