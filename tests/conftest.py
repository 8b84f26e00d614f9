"""Fixtures for every test directory: the throwaway PostgreSQL cluster, started once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import PostgresCluster, PostgresUnavailable, running_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    try:
        with running_postgres() as cluster:
            yield cluster
    except PostgresUnavailable as error:
        pytest.fail(str(error), pytrace=False)
