"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""


class TrainclockError(Exception):
    """A problem with the user's input or environment, with what to do about it."""

    exit_code = 2


class UsageError(TrainclockError):
    """A bad argument, name or setting."""


class DataError(TrainclockError):
    """A missing, corrupt or unusable data file."""


class ResourceError(TrainclockError):
    """The machine cannot run what was asked (memory, devices)."""
