"""spillway: out-of-core sort and shuffle of Arrow data under hard memory budgets.

``spillway.sort`` and ``spillway.shuffle`` take a ``pyarrow.Table``, a ``pyarrow.dataset.Dataset``,
any object with ``__arrow_c_stream__`` (a ``RecordBatchReader``, a Polars or DuckDB result), or a
path or glob of Parquet, Arrow IPC or CSV files. They run on a device of ``device_memory`` bytes
(emulated in host memory by default) whose overflow spills to ``host_memory`` bytes of host memory
and then to disk under ``spill_dir``, and return ``pyarrow.RecordBatchReader`` streams, or write
files with ``output=``. An ``Environment`` holds the budgets for several calls and reports what
the lease arbiter and the spill store did.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import pyarrow as pa  # loads Arrow C++, which the native module links

from . import _build_info
from ._errors import (
    CancelledError,
    CorruptionError,
    InternalError,
    InvalidArgumentError,
    NotSupportedError,
    OutOfMemoryError,
    SpillwayError,
    SpillwayIOError,
)


def _same_arrow(built: str, installed: str) -> bool:
    return built.split(".")[:2] == installed.split(".")[:2]


if not _same_arrow(_build_info.PYARROW_VERSION, pa.__version__):
    raise ImportError(
        f"spillway was built against pyarrow {_build_info.PYARROW_VERSION}, but pyarrow "
        f"{pa.__version__} is installed: reinstall spillway (pip install --no-build-isolation .) "
        f"or install pyarrow=={_build_info.PYARROW_VERSION}"
    )

from . import _spillway  # noqa: E402  (after pyarrow: Arrow C++ is loaded by then)

__version__ = _build_info.SPILLWAY_VERSION

Size = Union[int, str]
"""A byte count: an int, or a string such as ``"512MiB"``, ``"2GiB"``, ``"1.5 GB"``."""

SortKey = Union[str, Tuple[str, str], Tuple[str, str, str]]
"""A column name (ascending), ``(name, "ascending" | "descending")``, or
``(name, order, "at_start" | "at_end")`` with the key's own null placement."""

DEFAULT_DEVICE_MEMORY = "512MiB"
DEFAULT_HOST_MEMORY = "2GiB"

__all__ = [
    "Environment",
    "sort",
    "shuffle",
    "SpillwayError",
    "InvalidArgumentError",
    "NotSupportedError",
    "OutOfMemoryError",
    "SpillwayIOError",
    "CorruptionError",
    "CancelledError",
    "InternalError",
]


def _bytes(name: str, value: Size) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidArgumentError(f"{name}: give a byte count or a size such as '512MiB', not {value!r}")
    size = _spillway.parse_bytes(value) if isinstance(value, str) else value
    if size <= 0:
        raise InvalidArgumentError(f"{name}: must be more than zero bytes, not {value!r}")
    return size


def _threads(threads: Optional[int]) -> None:
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise InvalidArgumentError(f"threads: give a number from 1 to 1024, not {threads!r}")
    _spillway.use_threads(threads)


class Environment:
    """The budgets that sorts and shuffles run under, and what they did.

    A device of ``device_memory`` bytes (``backend="cpu"``: emulated in host memory; ``"cuda"``:
    the GPU's memory, in a build with the CUDA backend), its lease arbiter, and a spill store that
    keeps what does not fit the device in ``host_memory`` bytes of host memory, then on disk under
    ``spill_dir`` (default: ``$TMPDIR`` or ``/tmp``). ``threads`` sizes the process's worker pool
    (default: the cores this process may use). With ``report=True`` the run is recorded over time
    for ``report()`` and ``write_report()``.

    Pass it as ``env=`` to ``sort`` and ``shuffle``; several may run in it at once. Its memory and
    spill directory go when it is closed (``close()`` or ``with``) and every result read from it
    has been let go.
    """

    def __init__(
        self,
        device_memory: Size = DEFAULT_DEVICE_MEMORY,
        host_memory: Size = DEFAULT_HOST_MEMORY,
        spill_dir: Union[str, os.PathLike, None] = None,
        threads: Optional[int] = None,
        backend: str = "cpu",
        report: bool = False,
    ) -> None:
        _threads(threads)
        if backend not in ("cpu", "cuda", "auto"):
            raise InvalidArgumentError(f"backend: cpu, cuda or auto, not {backend!r}")
        self._native: Optional[Any] = _spillway.NativeEnvironment(
            device_memory=_bytes("device_memory", device_memory),
            host_memory=_bytes("host_memory", host_memory),
            spill_dir="" if spill_dir is None else os.fspath(spill_dir),
            backend=backend,
            record=bool(report),
        )
        self._report = bool(report)

    def _handle(self) -> Any:
        if self._native is None:
            raise InvalidArgumentError("the Environment is closed")
        return self._native

    def statistics(self) -> dict:
        """What the device, the lease arbiter, the spill store and the last sort did, as a dict:
        ``device`` (capacity, used, peak bytes, host budget and peak, out-of-memory failures
        injected by ``SPILLWAY_INJECT_OOM``), ``leases`` (grants, waits, bytes lent and borrowed,
        ...), ``spill`` (bytes on each tier now, the moves between tiers with their counts and
        bytes, disk compression, errors), ``last_sort`` (rows, batches, merge rounds, retries,
        splits, copies per input byte) and ``unprotected_allocations`` (device allocations made
        outside every retry block, counted with ``SPILLWAY_RETRY_COVERAGE=1``)."""
        return self._handle().statistics()

    def report(self) -> dict:
        """The run report (``report=True``): samples over time of device, host and disk bytes,
        leases and progress, and counts of spills, retries and splits, as a dict."""
        text = self._handle().report_json()
        if text is None:
            raise InvalidArgumentError("the run report is recorded by an Environment(report=True) only")
        return json.loads(text)

    def write_report(self, path: Union[str, os.PathLike]) -> None:
        """Writes the run report as one HTML file with charts at ``path``, and its data as JSON
        beside it (the extension replaced by ``.json``)."""
        html = pathlib.Path(path)
        if html.suffix == ".json":
            raise InvalidArgumentError(f"report path {str(html)!r} must not end in .json (the JSON goes beside it)")
        self._handle().write_report(str(html), str(html.with_suffix(".json")))

    def close(self) -> None:
        """Lets the environment go; results still being read keep what they need."""
        if self._native is not None:
            self._native.close()
            self._native = None

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _environment(
    env: Optional[Environment],
    device_memory: Optional[Size],
    host_memory: Optional[Size],
    spill_dir: Union[str, os.PathLike, None],
    threads: Optional[int],
) -> Environment:
    if env is None:
        return Environment(
            DEFAULT_DEVICE_MEMORY if device_memory is None else device_memory,
            DEFAULT_HOST_MEMORY if host_memory is None else host_memory,
            spill_dir,
            threads,
        )
    if not isinstance(env, Environment):
        raise TypeError(f"env: give a spillway.Environment, not {type(env).__name__}")
    given = [
        name
        for name, value in (
            ("device_memory", device_memory),
            ("host_memory", host_memory),
            ("spill_dir", spill_dir),
            ("threads", threads),
        )
        if value is not None
    ]
    if given:
        raise InvalidArgumentError(f"{', '.join(given)}: give them to the Environment when env= is given")
    return env


def _source(source: Any) -> Tuple[Optional[object], str, Optional[str]]:
    """Returns (an Arrow C stream capsule, a name for messages, a dataset path)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        return None, path, path
    dataset_module = sys.modules.get("pyarrow.dataset")
    if dataset_module is not None and isinstance(source, dataset_module.Dataset):
        return source.scanner().to_reader().__arrow_c_stream__(), "pyarrow.dataset.Dataset", None
    if hasattr(source, "__arrow_c_stream__"):
        name = f"{type(source).__module__}.{type(source).__name__}"
        if isinstance(source, pa.Table):
            name = "pyarrow.Table"
        return source.__arrow_c_stream__(), name, None
    raise TypeError(
        "source: give a path or glob of Parquet, Arrow IPC or CSV files, a pyarrow.Table, a "
        f"pyarrow.dataset.Dataset or an object with __arrow_c_stream__, not {type(source).__name__}"
    )


def _sort_keys(by: Union[SortKey, Sequence[SortKey]], null_placement: str) -> List[Tuple[str, bool, bool]]:
    if null_placement not in ("at_start", "at_end"):
        raise InvalidArgumentError(f"null_placement: 'at_start' or 'at_end', not {null_placement!r}")
    nulls_first = null_placement == "at_start"
    entries: Iterable[Any] = [by] if isinstance(by, (str, tuple)) else by
    keys = []
    for entry in entries:
        if isinstance(entry, str):
            keys.append((entry, False, nulls_first))
            continue
        if not isinstance(entry, tuple) or len(entry) not in (2, 3) or not isinstance(entry[0], str):
            raise InvalidArgumentError(
                f"by: give column names, (name, order) or (name, order, null_placement), not {entry!r}"
            )
        name, order = entry[0], entry[1]
        if order not in ("ascending", "descending"):
            raise InvalidArgumentError(f"by: the order of {name!r} is 'ascending' or 'descending', not {order!r}")
        placement = entry[2] if len(entry) == 3 else null_placement
        if placement not in ("at_start", "at_end"):
            raise InvalidArgumentError(f"by: the null placement of {name!r} is 'at_start' or 'at_end', not {placement!r}")
        keys.append((name, order == "descending", placement == "at_start"))
    if not keys:
        raise InvalidArgumentError("by: give at least one column")
    return keys


def _output(output: Union[str, os.PathLike, None]) -> Optional[str]:
    return None if output is None else os.fspath(output)


def sort(
    source: Any,
    by: Union[SortKey, Sequence[SortKey]],
    *,
    null_placement: str = "at_end",
    env: Optional[Environment] = None,
    device_memory: Optional[Size] = None,
    host_memory: Optional[Size] = None,
    spill_dir: Union[str, os.PathLike, None] = None,
    threads: Optional[int] = None,
    output: Union[str, os.PathLike, None] = None,
    output_format: str = "parquet",
    file_size: Size = "256MiB",
    format: Optional[str] = None,
    batch_size: Size = "128MiB",
    strategy: str = "auto",
    check_order: bool = True,
) -> Union[pa.RecordBatchReader, List[str]]:
    """Sorts ``source`` by ``by`` out of core, within the budgets.

    ``by`` is a column name, or a list of names, ``(name, "ascending" | "descending")`` pairs and
    ``(name, order, "at_start" | "at_end")`` triples, the first most significant, as
    ``pyarrow.Table.sort_by`` takes them; ``null_placement`` ("at_end" or "at_start") puts the
    null keys of the others last or first, in either direction. Rows with equal keys may come in
    any order.

    The whole input is read and sorted before this returns (the GIL released; Ctrl-C stops it
    between batches and removes its spill files). The result is a ``pyarrow.RecordBatchReader``
    of the sorted rows, merged as it is read; its spill files go once it is read to the end or let
    go. With ``output=`` the rows are written instead into that directory (new or empty) as
    ``output_format`` files ("parquet", "csv" or "arrow") of about ``file_size``, which appear
    only once all are complete, and their paths are returned.

    ``env`` runs it in an ``Environment``; without one, a new environment of ``device_memory``
    (512MiB), ``host_memory`` (2GiB), ``spill_dir`` and ``threads`` is made for this call.
    ``format`` names the format of a path source when its extension does not ("parquet", "csv",
    "arrow" or "arrows"); ``batch_size`` is the target size of a read batch (at most 1/8 of the
    device); ``strategy`` is "merge", "sample" or "auto"; ``check_order`` checks every output
    batch's order against the batch before it.

    Raises ``InvalidArgumentError`` (a ``ValueError``) for a column that is not there or a budget
    that is too small, ``NotSupportedError`` for a column type spillway does not sort,
    ``OutOfMemoryError`` (a ``MemoryError``) when the budgets cannot hold the sort even spilled,
    ``SpillwayIOError`` (an ``OSError``) when a file or the spill disk fails. A failure while the
    result is read comes as pyarrow's exception of the same kind (``ArrowMemoryError``,
    ``ArrowInvalid``, ``ArrowIOError``), with the same message.
    """
    keys = _sort_keys(by, null_placement)
    environment = _environment(env, device_memory, host_memory, spill_dir, threads)
    stream, name, path = _source(source)
    result = _spillway.sort(
        env=environment._handle(),
        stream=stream,
        name=name,
        path=path,
        format=format or "",
        keys=keys,
        batch_bytes=_bytes("batch_size", batch_size),
        strategy=strategy,
        check_order=bool(check_order),
        output=_output(output),
        output_format=output_format,
        file_bytes=_bytes("file_size", file_size),
    )
    if output is not None:
        return list(result)
    return pa.RecordBatchReader._import_from_c_capsule(result)


def shuffle(
    source: Any,
    by: Union[str, Sequence[str]],
    partitions: int,
    *,
    seed: int = 0,
    env: Optional[Environment] = None,
    device_memory: Optional[Size] = None,
    host_memory: Optional[Size] = None,
    spill_dir: Union[str, os.PathLike, None] = None,
    threads: Optional[int] = None,
    output: Union[str, os.PathLike, None] = None,
    output_format: str = "parquet",
    file_size: Size = "256MiB",
    format: Optional[str] = None,
    batch_size: Size = "64MiB",
) -> Union[List[pa.RecordBatchReader], List[List[str]]]:
    """Hash-partitions ``source`` by the columns ``by`` into ``partitions`` partitions.

    Every row lands in exactly one partition, and rows with equal keys in the same one (a hash of
    the keys with ``seed``). The shards are spillable in the environment's spill store, as for
    ``sort``; the input is read and partitioned before this returns (the GIL released, Ctrl-C
    stops it). The result is one ``pyarrow.RecordBatchReader`` per partition, each read from the
    shuffle into host memory when it is first read; with ``output=`` the partitions are written
    into that directory (new or empty) as ``partition-<p>-<n>`` files instead, and the files of
    each partition are returned. The other arguments are those of ``sort``.
    """
    names = [by] if isinstance(by, str) else list(by)
    if not names or not all(isinstance(name, str) for name in names):
        raise InvalidArgumentError(f"by: give column names, not {by!r}")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= (1 << 20):
        raise InvalidArgumentError(f"partitions: give a number from 1 to {1 << 20}, not {partitions!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < (1 << 64):
        raise InvalidArgumentError(f"seed: give an unsigned 64-bit integer, not {seed!r}")
    environment = _environment(env, device_memory, host_memory, spill_dir, threads)
    stream, name, path = _source(source)
    result = _spillway.shuffle(
        env=environment._handle(),
        stream=stream,
        name=name,
        path=path,
        format=format or "",
        keys=names,
        partitions=partitions,
        seed=seed,
        batch_bytes=_bytes("batch_size", batch_size),
        output=_output(output),
        output_format=output_format,
        file_bytes=_bytes("file_size", file_size),
    )
    if output is not None:
        return [list(files) for files in result]
    return [pa.RecordBatchReader._import_from_c_capsule(capsule) for capsule in result]
