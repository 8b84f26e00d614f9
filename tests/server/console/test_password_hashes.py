"""The product hashes office passwords at argon2-cffi's default costs (RFC 9106, low memory),
and refuses an unknown name after a hash of those same costs; tests elsewhere in this process
hash cheaply (tests/conftest.py), never these."""

from __future__ import annotations

import argon2
import pytest

from server.console import users
from server.console.models import console_tables
from server.db.store import open_store

pytestmark = pytest.mark.product_password_hashes


def test_the_product_hashes_at_argon2s_default_costs() -> None:
    assert users._hasher.type is argon2.Type.ID
    default = argon2.profiles.RFC_9106_LOW_MEMORY
    assert (users._hasher.time_cost, users._hasher.memory_cost, users._hasher.parallelism) == (
        default.time_cost,
        default.memory_cost,
        default.parallelism,
    )


def test_an_unknown_name_costs_the_hash_of_a_known_one() -> None:
    # The written-out hash of "no such user" has the costs every new password gets: were the
    # hasher's parameters raised, it would need a rehash, and unknown names would answer faster.
    assert not users._hasher.check_needs_rehash(users._NOBODY)
    assert users._hasher.verify(users._NOBODY, "no such user")
    stored = users._hasher.hash("a known one's password")
    assert users._NOBODY.split("$")[:4] == stored.split("$")[:4]


def test_a_stored_password_is_the_products_argon2id_hash(server_sqlite: str) -> None:
    store = open_store(server_sqlite)
    try:
        tables = console_tables(store)
        users.add_user(tables, "ana", "admin", "a clear secret")
        [row] = tables.User.select()
        assert row.password_hash.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
        assert "a clear secret" not in row.password_hash
        assert users.check_password(tables, "ana", "a clear secret") is not None
        assert users.check_password(tables, "ana", "a wrong secret") is None
        assert users.check_password(tables, "nobody", "a clear secret") is None
    finally:
        store.close()
