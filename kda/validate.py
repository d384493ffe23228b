"""python -m kda.validate: the model against measured Ascend timings. The command line lives in kda/cli/validate.py."""
import sys

from kda.cli.validate import main

if __name__ == "__main__":
    sys.exit(main())
