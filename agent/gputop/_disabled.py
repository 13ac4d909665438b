"""The handle attach() returns when the agent is off: it answers like an
Agent (status, detach, configure, post) and does nothing."""

from __future__ import annotations

from typing import Any

from . import _env


class Disabled:
    """What attach() returns when GPUTOP=0 (or when the agent cannot start)."""

    alive = False
    connected = False

    def __init__(self, reason: str) -> None:
        self.last_error = reason

    def detach(self, timeout: float = 0) -> None:
        """Nothing to stop."""

    def configure(self, rate_hz: float | None = None, socket: str | None = None) -> None:
        """Nothing to configure."""

    def post(self, frame: dict[str, Any], urgent: bool = False) -> None:
        """Drop the frame."""

    def status(self) -> dict[str, Any]:
        return {"enabled": _env.enabled(), "attached": False, "connected": False,
                "socket": _env.socket_path(), "last_error": self.last_error, "refused": ""}

    def __repr__(self) -> str:
        return f"<gputop agent off: {self.last_error}>"
