"""pytest options for flashspec's tests: `slow` tests (longer fuzz and kill runs) are skipped unless
`--slow` is given, as `nbdev_test` skips notebook cells flagged `slow` unless asked."""
import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long settings of a test; run with --slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"): return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords: item.add_marker(skip)
