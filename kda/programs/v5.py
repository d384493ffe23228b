"""v5: placeholder, replaced below once measured."""
from npusim.schedule import Design

from .fla import FLA

V5 = Design("v5", FLA.passes, "placeholder", dict(FLA.notes))
