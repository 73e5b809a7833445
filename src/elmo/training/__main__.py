"""``python -m elmo.training COMMAND ...`` runs the same commands as ``elmo COMMAND ...`` (e.g. under torchrun)."""

import sys

from elmo.cli import main

sys.exit(main())
