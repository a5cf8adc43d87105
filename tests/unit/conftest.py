"""Fixtures shared by the unit tests: the captured-output fixture tree."""

import os

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


@pytest.fixture
def fixture_path():
    def path(*parts):
        full = os.path.join(FIXTURES, *parts)
        assert os.path.exists(full), full
        return full

    return path


@pytest.fixture
def rocminfo_text(fixture_path):
    def read(name):
        with open(fixture_path("rocminfo", name + ".txt")) as handle:
            return handle.read()

    return read
