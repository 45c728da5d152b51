"""Runs pytest with the given arguments; exits 77 (CTest's skip) when pytest is missing."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed: python3 -m pip install pytest", file=sys.stderr)
    sys.exit(77)

sys.exit(pytest.main(sys.argv[1:]))
