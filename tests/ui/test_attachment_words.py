"""What an attachment says on screen: the exact words of issue 15."""

from __future__ import annotations

import pytest

from ui.viewmodels.attachment_words import UploadWords, percent, state_in_words, waiting_in_words


@pytest.mark.parametrize(
    ("upload", "words"),
    [
        (UploadWords("uploading", offset=45, size=100), "Uploading 45 %"),
        (UploadWords("uploading", offset=0, size=100), "Uploading 0 %"),
        # Never "100 %" before the server confirmed the last byte.
        (UploadWords("uploading", offset=999, size=1000), "Uploading 99 %"),
        (UploadWords("waiting", size=100, waits_for_unmetered=True), "Waiting for Wi-Fi"),
        (UploadWords("uploading", offset=10, size=100, waits_for_unmetered=True),
         "Waiting for Wi-Fi"),
        (UploadWords("waiting", size=100), "Waiting to upload"),
        (UploadWords("uploaded", offset=100, size=100), "Uploaded"),
        (UploadWords("failed", reason="the server refuses this file type"),
         "Failed: the server refuses this file type"),
        (UploadWords("failed"), "Failed: no reason recorded"),
        # No link: nothing moves, so nothing claims to be uploading.
        (UploadWords("waiting", size=100, link_down=True), "Waiting for a connection"),
        (UploadWords("uploading", offset=45, size=100, link_down=True),
         "Waiting for a connection · 45 % sent"),
        (UploadWords("uploading", offset=0, size=100, link_down=True),
         "Waiting for a connection"),
        (UploadWords("uploading", offset=45, size=100, link_down=True, waits_for_unmetered=True),
         "Waiting for Wi-Fi"),
        (UploadWords("uploaded", offset=100, size=100, link_down=True), "Uploaded"),
        (UploadWords("failed", reason="too large", link_down=True), "Failed: too large"),
    ],
)  # fmt: skip
def test_upload_states_read_as_the_issue_words_them(upload: UploadWords, words: str) -> None:
    assert state_in_words(upload) == words


def test_percent_of_an_empty_file_is_never_a_division_by_zero() -> None:
    assert percent(0, 0) == 0
    assert percent(100, 100) == 100


@pytest.mark.parametrize(
    ("images", "others", "words"),
    [
        (2, 0, "2 photos waiting"),
        (1, 0, "1 photo waiting"),
        (0, 1, "1 file waiting"),
        (2, 3, "2 photos, 3 files waiting"),
        (0, 0, ""),
    ],
)
def test_the_list_row_says_what_waits(images: int, others: int, words: str) -> None:
    assert waiting_in_words(images, others) == words


def test_the_list_row_never_calls_a_failed_upload_waiting() -> None:
    assert waiting_in_words(0, 1, 0, 1) == "1 file failed"
    assert waiting_in_words(3, 1, 1, 1) == "2 photos waiting · 1 photo, 1 file failed"
