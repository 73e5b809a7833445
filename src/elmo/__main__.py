"""``python -m elmo``: the ``elmo`` command (so ``torchrun -m elmo embed ...`` runs it once per rank)."""

import sys

from elmo.cli import main

sys.exit(main())
