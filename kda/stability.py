"""python -m kda.stability: where each design breaks numerically. The command line lives in kda/cli/stability.py."""
import sys

from kda.cli.stability import main

if __name__ == "__main__":
    sys.exit(main())
