"""python -m npusim.calibrate: fit a profile to measured timings. The command line lives in npusim/fit/calibrate.py."""
import sys

from npusim.fit.calibrate import main

if __name__ == "__main__":
    sys.exit(main())
