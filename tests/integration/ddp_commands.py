"""Run several ``zdebias`` commands in one launched process group (tests/integration/test_ddp.py).

    python -m torch.distributed.run --standalone --nproc_per_node 2 ddp_commands.py ARGV.json

``ARGV.json`` holds a list of argument lists; each runs through :func:`zdebias.cli.main`, the
function ``torchrun -m zdebias.cli ...`` calls, so one launch (one start-up of torch in each
process) serves every command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from zdebias.cli import main

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from helpers.fake_cuda import install_if_wanted

    install_if_wanted()  # ZDEBIAS_TEST_FAKE_CUDA=1 reaches the launched processes too
    for argv in json.loads(Path(sys.argv[1]).read_text()):
        try:
            main(argv)
        except SystemExit as exit_:
            if exit_.code:
                raise
