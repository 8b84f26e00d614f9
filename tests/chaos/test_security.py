"""Security end to end: the token stays secret, keys stay per device, revocation is immediate,
TLS is verified by default, and every /v1 path needs a token."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.store.store import Store
from app.sync.errors import NetworkError
from app.sync.transport import ServerClient, TransportConfig
from tests.chaos import plans as faults
from tests.chaos.helpers import add_device, new_id, run_cli
from tests.chaos.plans import ScriptedPlan
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess, server_command


def _files(root: Path) -> Iterator[Path]:
    yield from (path for path in root.rglob("*") if path.is_file())


def test_token_never_written_anywhere(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy
) -> None:
    token = add_device(server_process.db_url, "secretive")
    data_dir = tmp_path / "device"
    with Store(data_dir) as store:
        entity = store.record_edit("create", None, {"title": "secret test"}).entity_id
    proxy.set_plan(ScriptedPlan([faults.drop_response(), faults.status(503, 1),
                                 faults.garble()], paths="/v1/"))  # fmt: skip
    outputs = [
        run_cli(data_dir, "sync", "--until-idle", "--timeout", "60",
                server=proxy.base_url, token=token),
        run_cli(data_dir, "edit", entity, "title=changed"),
        # Failures print their reasons (and would print a crash): none may carry the token.
        run_cli(data_dir, "sync", "--until-idle", "--timeout", "3",
                server="http://127.0.0.1:9", token=token),
        run_cli(data_dir, "sync", "--until-idle", "--timeout", "20",
                server=server_process.base_url, token=token + "x"),
        run_cli(data_dir, "status", "--json"),
        run_cli(data_dir, "dead", "list", "--json"),
    ]  # fmt: skip
    assert outputs[0].returncode == 0, outputs[0].stderr
    assert outputs[3].returncode == 3  # a wrong token pauses for sign-in
    secret = token.encode()
    hash_part = token[8:24].encode()  # any fragment long enough to matter
    for done in outputs:
        assert token not in done.stdout + done.stderr
    for path in [*_files(data_dir), *_files(tmp_path / "server")]:
        data = path.read_bytes()
        assert secret not in data, path
        assert hash_part not in data, path
    log = "".join(server_process.lines)
    assert "request" in log
    assert token not in log
    assert token[8:24] not in log


def test_idempotent_replies_are_private_to_their_device(server_process: ServerProcess) -> None:
    tokens = [add_device(server_process.db_url, name) for name in ("owner", "other", "third")]
    key = new_id()
    body = {"entity_id": new_id(), "op": "create", "base_version": None,
            "fields": {"title": "owner's private notes", "notes": "only mine"}}  # fmt: skip
    replies = []
    for token in tokens[:2]:
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
        replies.append(
            httpx.post(f"{server_process.base_url}/v1/mutations", json=body, headers=headers)
        )
    owner, other = replies
    assert owner.status_code == 201
    # The other device's identical key is its own new request: no replay of the owner's reply.
    assert "idempotent-replayed" not in other.headers
    assert other.status_code == 409
    assert other.json()["error"] == "version_conflict"
    headers = {"Authorization": f"Bearer {tokens[2]}", "Idempotency-Key": key}
    different = {**body, "entity_id": new_id()}
    mine = httpx.post(f"{server_process.base_url}/v1/mutations", json=different, headers=headers)
    assert mine.status_code == 201  # not "idempotency_key_reused": another device's key space


def test_revoked_token_stops_at_once(tmp_path: Path, server_process: ServerProcess) -> None:
    token = add_device(server_process.db_url, "lost-phone")
    data_dir = tmp_path / "device"
    with Store(data_dir) as store:
        store.record_edit("create", None, {"title": "before"})
    first = run_cli(data_dir, "sync", "--until-idle", "--timeout", "30",
                    server=server_process.base_url, token=token)  # fmt: skip
    assert first.returncode == 0, first.stderr
    revoke = subprocess.run(
        [*server_command(), "revoke-device", "--db", server_process.db_url, "lost-phone"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "Revoked" in revoke.stdout
    with Store(data_dir) as store:
        after = store.record_edit("create", None, {"title": "after"}).entity_id
    second = run_cli(data_dir, "sync", "--until-idle", "--timeout", "30",
                     server=server_process.base_url, token=token)  # fmt: skip
    assert second.returncode == 3
    assert "sign in" in second.stderr
    with Store(data_dir) as store:
        depth = store.stats()["queue_depth"]
    assert depth["pending"] == 1
    assert depth["dead"] == 0
    direct = httpx.get(f"{server_process.base_url}/v1/records/{after}",
                       headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert direct.status_code == 401


# tus 1.0.0 has clients ask the server's capabilities with an OPTIONS before they sign in.
PUBLIC = {("options", "/v1/uploads")}
GENERIC_HEADERS = {"date", "server", "content-length", "x-correlation-id"}


def test_every_v1_path_needs_a_token(server_process: ServerProcess) -> None:
    schema = httpx.get(f"{server_process.base_url}/openapi.json").json()
    checked = 0
    for path, operations in schema["paths"].items():
        if not path.startswith("/v1/"):
            continue
        concrete = path.replace("{entity_id}", new_id()).replace("{conflict_id}", "1")
        for method in operations:
            if (method, path) in PUBLIC:
                reply = httpx.request(method.upper(), f"{server_process.base_url}{concrete}")
                # tus discovery: what the server can do, never anything of a device.
                assert reply.status_code == 204, reply
                assert reply.content == b"", reply
                told = {k.lower() for k in reply.headers} - GENERIC_HEADERS
                assert all(k.startswith("tus-") for k in told), reply.headers
                continue
            for headers in ({}, {"Authorization": "Bearer fst_not-a-real-token"},
                            {"Authorization": "Basic YWRtaW46YWRtaW4="}):  # fmt: skip
                reply = httpx.request(
                    method.upper(),
                    f"{server_process.base_url}{concrete}",
                    headers={**headers, "Idempotency-Key": "k"},
                    json={},
                )
                assert reply.status_code == 401, (method, path, headers, reply.text)
                checked += 1
    assert checked >= 3 * 8


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fieldsync test CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_tls_is_verified_by_default(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            body = b'{"status": "ok"}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        default = ServerClient(url, lambda: "fst_x")
        with pytest.raises(NetworkError):
            await default.healthz()
        await default.aclose()
        trusting = ServerClient(url, lambda: "fst_x", TransportConfig(verify=str(cert)))
        assert await trusting.healthz()
        await trusting.aclose()
    finally:
        server.close()
        await server.wait_closed()
