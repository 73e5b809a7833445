import sys

from elmo.serve.commands import main

sys.exit(main())
