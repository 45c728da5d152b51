"""The exceptions of spillway: one per kind of failure of the library, each also a subclass of
the built-in exception a Python caller would catch for it."""


class SpillwayError(Exception):
    """Any failure of spillway."""


class InvalidArgumentError(SpillwayError, ValueError):
    """Bad input the caller can fix: an unknown column, a bad size, a budget too small."""


class NotSupportedError(SpillwayError, TypeError, NotImplementedError):
    """A column type, format or backend this build of spillway does not provide."""


class OutOfMemoryError(SpillwayError, MemoryError):
    """The budgets are too small for the input, after spilling, retrying and splitting."""


class SpillwayIOError(SpillwayError, OSError):
    """A file or directory failed: the input, the output, or the spill disk."""


class CorruptionError(SpillwayIOError):
    """Data on disk is not what was written (a checksum or a truncated file)."""


class CancelledError(SpillwayError, RuntimeError):
    """A task of the run was cancelled."""


class InternalError(SpillwayError, RuntimeError):
    """A broken invariant inside spillway: a bug, never caused by the input."""


__all__ = [
    "SpillwayError",
    "InvalidArgumentError",
    "NotSupportedError",
    "OutOfMemoryError",
    "SpillwayIOError",
    "CorruptionError",
    "CancelledError",
    "InternalError",
]
