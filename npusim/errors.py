"""Errors the runtime raises. Each carries one line that names what is wrong and where."""


class NpuSimError(Exception):
    """Base class: `str(err)` is a complete one-line explanation for the user."""


class ProfileError(NpuSimError):
    """A hardware profile file is missing, malformed, or has a bad or missing field."""


class DataflowError(NpuSimError):
    """A phase program breaks the Cube/Vector data-flow rules (missing sync, misplaced op, ...)."""


class WorkspaceError(NpuSimError):
    """A payload does not fit its workspace region (resident region or ping/pong slot)."""
