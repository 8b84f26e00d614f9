"""Browser: every page at 768 and 1280 px, light and dark: labelled, keyboard-reachable, AA."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from server.embedded import EmbeddedServer
from tests.e2e.console.conftest import screenshot, sign_in
from tests.e2e.console.phones import Phone
from tests.support.api import ServerApi

PAGES = {
    "overview": "/console/",
    "fleet": "/console/devices",
    "failed": "/console/failed",
    "conflicts": "/console/conflicts",
    "work-orders": "/console/work-orders",
    "work-order-new": "/console/work-orders/new",
    "people": "/console/people",
    "audit": "/console/audit",
}

_UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter(el => el.type !== 'hidden')
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map(el => el.outerHTML)"""

_COLOURS = """(selector) => [...document.querySelectorAll(selector)].slice(0, 3).map(el => {
  let back = el, bg = 'rgba(0, 0, 0, 0)';
  while (back && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
    bg = getComputedStyle(back).backgroundColor; back = back.parentElement;
  }
  return [getComputedStyle(el).color, bg];
})"""

#: Text whose contrast is checked on every page where it appears.
_TEXT = ["body", "a", "button", "label", "td", ".muted", ".sync-good", ".sync-amber",
         ".sync-bad", ".sync-never", ".error"]  # fmt: skip


def _rgb(css: str) -> tuple[float, float, float]:
    values = [float(v) for v in re.findall(r"[\d.]+", css)[:3]]
    return values[0], values[1], values[2]


def _luminance(rgb: tuple[float, float, float]) -> float:
    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    a, b = sorted((_luminance(_rgb(foreground)), _luminance(_rgb(background))), reverse=True)
    return (a + 0.05) / (b + 0.05)


@pytest.fixture
def busy_office(office: EmbeddedServer, tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A server with something on every page: phones, a work order, a failed change."""
    api = ServerApi(office.base_url, office.add_device("office", "admin"))
    api.create(title="Replace pump seal", assignee="ana", team="north")
    api.close()
    phone = Phone(office, tmp_path, "phone-a", user="ana", team="north")
    phone.sync()
    office.add_device("phone-b", user="bo")
    yield office
    phone.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [768, 1280])
def test_every_page_reads_well(
    browser: Browser, busy_office: EmbeddedServer, width: int, scheme: str
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page: Page = context.new_page()
    try:
        sign_in(page, busy_office)
        for name, path in PAGES.items():
            page.goto(busy_office.base_url + path)
            expect(page.locator("h1")).to_be_visible()
            assert page.evaluate(_UNLABELLED) == [], f"{name}: controls without a label"
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{name} scrolls sideways at {width} px"
            for selector in _TEXT:
                for colour, background in page.evaluate(_COLOURS, selector):
                    ratio = contrast(colour, background)
                    assert ratio >= 4.5, f"{name} {scheme}: {selector} {colour} on {background}"
            if width == 1280 and scheme == "light":
                screenshot(page, name)
            elif width == 768 and scheme == "dark":
                screenshot(page, f"{name}-768-dark")
        # Keyboard: the first Tab offers the skip link, the next ones the page list.
        page.goto(busy_office.base_url + "/console/")
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Overview")).to_be_focused()
    finally:
        context.close()
