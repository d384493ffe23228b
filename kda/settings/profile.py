"""The chip a run replays on: the named profile with the settings' workspace, field overrides, cores and
core model, loaded and the run's work checked once (work.py)."""
from __future__ import annotations

from npusim import Profile, load_profile

from kda.driver.checks import KdaInputError
from kda.settings.settings import Settings
from kda.settings.work import check_work


def profile_for(settings: Settings) -> Profile:
    profile = load_profile(settings.profile)
    if settings.workspace:
        profile = profile.replace(**{f"workspace__{k}": v for k, v in settings.workspace.items()})
    if settings.overrides:
        profile = profile.replace(**{k.replace(".", "__", 1): v for k, v in settings.overrides.items()})
    if settings.cores is not None:
        if settings.cores > profile.chip.ai_cores:        # a chip the profile does not describe
            raise KdaInputError(f"--cores {settings.cores}: profile {profile.name} has {profile.chip.ai_cores} "
                                f"AI cores (use at most that, or --set chip.ai_cores=N for another chip)")
        profile = profile.replace(chip__ai_cores=settings.cores)
    if not settings.core_model:
        profile = profile.without_core()
    return profile


def checked_profile(settings: Settings, samples: int = 0, versions: int = 1) -> Profile:
    """The run's profile, with the work its settings ask for (`versions` designs, `samples` uncertainty
    samples) checked against this machine: one line before hours of work."""
    profile = profile_for(settings)
    check_work(settings, profile, samples, versions)
    return profile


def check_interleave(settings: Settings, cores: int) -> None:
    """--interleave N alternates N sequences a core holds: more than the busiest core holds would be
    reported as asked while the run alternates fewer (a sweep may still ask for it: there it is one axis)."""
    per = (len(settings.seqlens) if settings.seqlens else settings.batch) * settings.heads
    most = -(-per // max(1, min(cores, per)))
    if settings.interleave > most:
        raise KdaInputError(f"--interleave {settings.interleave}: a core holds at most {most} sequence(s) here "
                            f"({per} over {min(cores, per)} core(s)); it cannot alternate more")
