"""The jars are resolved once: a second set-up neither calls Maven nor touches the classpath."""

from __future__ import annotations

import pytest

from streams.infra.install import install_jars, jars_current, resolved_versions


def test_second_install_downloads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    install_jars()  # no-op when `make setup` already ran; otherwise resolves now
    assert jars_current()
    monkeypatch.setenv("PATH", "/nonexistent")  # were Maven needed now, it could not be found
    assert install_jars() is False


def test_resolved_versions_are_the_pinned_ones() -> None:
    versions = resolved_versions()
    assert versions["kafka"].startswith("3.9.")
    assert versions["zookeeper"].startswith("3.8.")
