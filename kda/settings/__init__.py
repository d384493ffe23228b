"""The settings of a run and what they make: built and checked once, where a run starts.

    settings.py   Settings: everything a run depends on; the checks on each dimension
    profile.py    the chip: the named profile with the settings' overrides, loaded once, the work checked
    work.py       the work a run asks for, against what this machine can run
    inputs.py     the inputs from the seed, FLA's in-kernel options on them, the device
    precision.py  the precision policy: a type per hand-off, the state's, the accumulation's
"""
from kda.settings.settings import Settings

__all__ = ["Settings"]
