"""Reads the accessibility tree of a running app over AT-SPI and acts on it, by names only.

Run by Debian's /usr/bin/python3 (python3-pyatspi, the library GNOME's dogtail drives), not
by the project's venv: the tests talk to it over stdin/stdout, one JSON request a line and
one JSON answer a line, as a separate process, so the venv needs nothing of the system's.

Requests: {"op": "texts"}  → every showing node's name (and a text field's contents);
          {"op": "click", "name": N, "role": R?, "prefix": bool?, "pointer": bool?} → does
              the node's first action (press); with "prefix", the first node whose name
              starts with N; with "pointer" (or a node with no press action: a list row, a
              file dialog's entry), a mouse click on the node's centre, as a person taps it;
          {"op": "type", "name": N, "text": T} → focuses the field and types T;
          {"op": "scroll", "name": N, "role": R?, "prefix": bool?, "clicks": C} → turns the
              mouse wheel C notches over the showing node named N (down; up when C < 0),
              as a person scrolls a page;
          {"op": "dump"} → the tree, for a failure message.
Every answer is {"ok": true, ...} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import sys
import time

import pyatspi

APP = sys.argv[1] if len(sys.argv) > 1 else "Fieldsync"


def application():
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and app.name == APP:
            return app
    raise LookupError(f"no application {APP!r} on the accessibility bus")


def showing(node) -> bool:
    states = node.getState()
    return states.contains(pyatspi.STATE_SHOWING) and states.contains(pyatspi.STATE_VISIBLE)


def walk(node, depth=0):
    if depth > 40:
        return
    yield node
    for i in range(node.childCount):
        child = node.getChildAtIndex(i)
        if child is not None:
            yield from walk(child, depth + 1)


def text_of(node) -> str:
    try:
        text = node.queryText()
    except NotImplementedError:
        return ""
    return text.getText(0, text.characterCount)


def shown_nodes():
    app = application()
    for node in walk(app):
        try:
            if showing(node):
                yield node
        except Exception:  # a node that went away while we looked
            continue


def find(name: str, role: str | None, prefix: bool = False):
    for node in shown_nodes():
        named = node.name.startswith(name) if prefix else node.name == name
        if named and (role is None or node.getRoleName() == role):
            return node
    raise LookupError(f"nothing showing is named {name!r}" + (f" ({role})" if role else ""))


def handle(request: dict) -> dict:
    op = request["op"]
    if op == "texts":
        texts = []
        for node in shown_nodes():
            role = node.getRoleName()
            if node.name:
                texts.append({"role": role, "name": node.name})
            if role in ("text", "entry", "password text"):
                texts.append({"role": role, "name": node.name, "text": text_of(node)})
        return {"ok": True, "texts": texts}
    if op == "click":
        node = find(request["name"], request.get("role"), bool(request.get("prefix")))
        try:
            action = node.queryAction()
        except NotImplementedError:
            action = None
        names = [action.getName(i) for i in range(action.nActions)] if action else []
        if names and names[0] != "Set Focus" and not request.get("pointer"):
            action.doAction(0)
        else:  # a list row: tapped where it is on screen, as a person would
            box = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
            x, y = box.x + box.width // 2, box.y + box.height // 2
            pyatspi.Registry.generateMouseEvent(x, y, pyatspi.MOUSE_B1C)
        return {"ok": True}
    if op == "type":
        # Keystrokes into the focused field, as a keyboard would (setTextContents would
        # change the text behind the app's back: it never sees an edit).
        node = find(request["name"], request.get("role"))
        if not node.queryComponent().grabFocus():
            raise LookupError(f"{request['name']!r} does not take the focus")
        time.sleep(0.2)
        pyatspi.Registry.generateKeyboardEvent(0, request["text"], pyatspi.KEY_STRING)
        return {"ok": True}
    if op == "scroll":
        node = find(request["name"], request.get("role"), bool(request.get("prefix")))
        box = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        x, y = box.x + box.width // 2, box.y + box.height // 2
        clicks = int(request["clicks"])
        for _ in range(abs(clicks)):  # X11's wheel: button 4 up, button 5 down
            pyatspi.Registry.generateMouseEvent(x, y, "b5c" if clicks > 0 else "b4c")
            time.sleep(0.05)
        return {"ok": True}
    if op == "dump":
        lines = []
        for node in walk(application()):
            try:
                mark = "" if showing(node) else " (hidden)"
                lines.append(f"{node.getRoleName()} {node.name!r}{mark}")
            except Exception:
                continue
        return {"ok": True, "tree": lines}
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    for line in sys.stdin:
        try:
            answer = handle(json.loads(line))
        except Exception as exc:  # every failure goes back to the test, in words
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
