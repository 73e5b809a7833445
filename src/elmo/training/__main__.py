import sys

from elmo.training.commands import main

sys.exit(main())
