"""python -m kda.attribution: which hand-off's rounding costs the most accuracy. The command line lives in kda/cli/attribution.py."""
import sys

from kda.cli.attribution import main

if __name__ == "__main__":
    sys.exit(main())
