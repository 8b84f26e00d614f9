"""The server's layout holds: few modules at the top, and only the HTTP layer speaks HTTP.

Routes (`server/routes/`) are thin doors; the domain (`server/db/`, `server/records/`,
`server/scope/`, `server/uploads/` and the plain modules beside them) raises `server.errors`
and never imports FastAPI, Starlette or the HTTP plumbing; `server/http.py` turns every
domain error into its answer from one table.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from pathlib import Path

import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

import server.routes
from server import errors
from server.app import create_app
from server.http import DOMAIN_ANSWERS, domain_answer
from server.settings import Settings

SERVER = Path(__file__).resolve().parents[2] / "server"

#: What may speak HTTP: the routes, their plumbing (and how they are served), the app, the
#: console's pages, the modules that run the app under uvicorn, and the admission middleware
#: (its 429s).
HTTP_LAYER = ("app.py", "http.py", "cli.py", "embedded.py", "listen.py", "routes/", "routing/",
              "console/", "admission/middleware.py")  # fmt: skip
HTTP_MODULES = ("fastapi", "starlette", "server.http", "server.routes", "server.routing",
                "server.app")  # fmt: skip


def _relative(path: Path) -> str:
    return path.relative_to(SERVER).as_posix()


def _domain_files() -> list[Path]:
    return [
        path for path in sorted(SERVER.rglob("*.py")) if not _relative(path).startswith(HTTP_LAYER)
    ]


def _imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return found


def test_at_most_15_modules_sit_directly_in_server() -> None:
    top = sorted(path.name for path in SERVER.glob("*.py"))
    assert len(top) <= 15, f"{len(top)} modules directly in server/ (group them): {top}"


def test_the_domain_imports_nothing_of_http() -> None:
    files = _domain_files()
    assert {"uploads/receive.py", "records/mutations.py", "errors.py"} <= {
        _relative(path) for path in files
    }
    speaking = {
        _relative(path): name
        for path in files
        for name in _imports(ast.parse(path.read_text(), str(path)))
        if name in HTTP_MODULES or name.startswith(tuple(f"{module}." for module in HTTP_MODULES))
    }
    assert speaking == {}, "domain code speaks HTTP; raise a server.errors error instead"


def test_only_the_http_layer_names_api_error() -> None:
    naming = [
        _relative(path)
        for path in _domain_files()
        if any(
            isinstance(node, ast.Name | ast.alias)
            and (node.id if isinstance(node, ast.Name) else node.name) == "ApiError"
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
        )
    ]
    assert naming == []


def test_routes_take_the_context_not_app_state() -> None:
    reading = [
        _relative(path)
        for path in sorted((SERVER / "routes").glob("*.py"))
        if "app.state" in path.read_text()
    ]
    assert reading == [], "take `context: Context` (server.http) instead"


def _route_modules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(server.routes.__path__, "server.routes.")]


def test_every_routes_module_is_one_router_and_the_app_serves_it(tmp_path: Path) -> None:
    app = create_app(
        Settings(db_url=f"sqlite:///{tmp_path}/server.db", attachments_dir=str(tmp_path / "a"))
    )
    served = {
        (path, method.upper())
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    modules = _route_modules()
    assert len(modules) >= 9
    for name in modules:
        router = getattr(importlib.import_module(name), "router", None)
        assert isinstance(router, APIRouter), f"{name} has no `router`"
        paths = {
            (route.path, method)
            for route in router.routes
            if isinstance(route, APIRoute)
            for method in route.methods
        }
        assert paths, f"{name}.router serves nothing"
        assert paths <= served, f"create_app does not include {name}.router"


def _domain_errors() -> list[type[errors.DomainError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, errors.DomainError)
        and value is not errors.DomainError
    ]


#: Families, never raised themselves.
_FAMILIES = {errors.DomainError, errors.NoRoom, errors.UploadError}


def test_every_domain_error_has_its_answer() -> None:
    raised = [kind for kind in _domain_errors() if kind not in _FAMILIES]
    assert len(raised) >= 13
    missing = [
        kind.__name__ for kind in raised if not any(base in DOMAIN_ANSWERS for base in kind.__mro__)
    ]
    assert missing == [], "a domain error without an answer would be a 500"
    assert not _FAMILIES & set(DOMAIN_ANSWERS)


@pytest.mark.parametrize(
    ("error", "status", "body", "offset"),
    [
        (errors.NotFound(), 404, {"error": "not_found"}, None),
        (
            errors.InvalidInput("Upload-Length: required"),
            422,
            {"error": "invalid_payload", "detail": "Upload-Length: required"},
            None,
        ),
        (errors.UploadLocked(), 423, {"error": "upload_locked"}, None),
        (errors.OffsetMismatch(1024), 409, {"error": "offset_mismatch"}, "1024"),
        (
            errors.ChecksumMismatch("the chunk does not match Upload-Checksum"),
            460,
            {"error": "checksum_mismatch", "detail": "the chunk does not match Upload-Checksum"},
            None,
        ),
    ],
)
def test_a_domain_error_answers_its_status_name_and_detail(
    error: errors.DomainError, status: int, body: dict[str, str], offset: str | None
) -> None:
    answer = domain_answer(error)
    assert answer.status_code == status
    assert json.loads(answer.body) == body
    assert answer.headers.get("upload-offset") == offset
    assert "connection" not in answer.headers


def test_an_answer_before_the_body_was_read_ends_the_connection() -> None:
    from server.uploads.blobs import UploadBusy

    answer = domain_answer(errors.OffsetMismatch(7, body_unread=True))
    assert (answer.status_code, answer.headers["upload-offset"]) == (409, "7")
    assert answer.headers["connection"] == "close"
    busy = domain_answer(UploadBusy())  # a subclass answers as its base
    assert (busy.status_code, json.loads(busy.body)) == (423, {"error": "upload_locked"})
