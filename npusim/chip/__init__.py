"""The chip: profile numbers, and what a recorded phase costs on them.

    profile.py    hardware profiles (TOML, a source for every number)
    profile_checks.py  a field's value and sampling range checked: what the model accepts
    cost.py       phase and hand-off durations
    capacity.py   what a phase holds in UB / L1 / L0, and its tiles
    pipes.py      a phase as MTE2 load / compute / MTE3-FixPipe store segments
    floor.py      host time a kernel model does not have
    isa.py        what instructions and transfers cost, from measured tables (the profile's [isa] table)
    lanes.py      many profiles at once: sampled fields as arrays over the samples
    issue.py      how a kernel issues its Vector work, where the source says more than one instruction per op
"""
