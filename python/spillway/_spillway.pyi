"""The native part of spillway (python/src/module.cpp); use the functions of `spillway`."""

from typing import Any, Dict, List, Optional, Tuple

class NativeEnvironment:
    def __init__(
        self, device_memory: int, host_memory: int, spill_dir: str, backend: str, record: bool
    ) -> None: ...
    def statistics(self) -> Dict[str, Any]: ...
    def report_json(self) -> Optional[str]: ...
    def write_report(self, html: str, json: str) -> None: ...
    def close(self) -> None: ...

def sort(
    env: NativeEnvironment,
    stream: Optional[object],
    name: str,
    path: Optional[str],
    format: str,
    keys: List[Tuple[str, bool, bool]],
    batch_bytes: int,
    strategy: str,
    check_order: bool,
    output: Optional[str],
    output_format: str,
    file_bytes: int,
) -> Any: ...
def shuffle(
    env: NativeEnvironment,
    stream: Optional[object],
    name: str,
    path: Optional[str],
    format: str,
    keys: List[str],
    partitions: int,
    seed: int,
    batch_bytes: int,
    output: Optional[str],
    output_format: str,
    file_bytes: int,
) -> Any: ...
def parse_bytes(text: str) -> int: ...
def use_threads(threads: int) -> None: ...
def worker_threads() -> int: ...
def arrow_io_available() -> bool: ...
