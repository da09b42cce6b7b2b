"""Run (or resume) the scripted 4-step SPADE loop in its own process: ``run_scripted.py CONFIG.json [RUN_DIR]``."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from spade_loop_fakes import register  # noqa: E402

register()

from curriculum.config import validate_config  # noqa: E402
from curriculum.loop import run  # noqa: E402

config = validate_config(json.loads(Path(sys.argv[1]).read_text()))
resume = Path(sys.argv[2]) if len(sys.argv) > 2 else None
result = run(config, resume=resume)
print(result.run_dir)
