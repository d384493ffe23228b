"""python -m kda.run: designs, numerics and timing. The command line lives in kda/cli/run.py."""
import sys

from kda.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
