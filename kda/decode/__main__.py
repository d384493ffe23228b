"""python -m kda.decode: the command line lives in kda/cli/decode.py."""
import sys

from kda.cli.decode import main

if __name__ == "__main__":
    sys.exit(main())
