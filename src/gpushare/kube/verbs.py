"""The calls gpushare makes, written once over any client's ``request``, and their answers.

Both clients only say how one request travels; what a GET, a dry-run create or a 404 means is
decided here, so the two cannot drift apart.
"""

from __future__ import annotations

import json

from gpushare.data import Json  # an apiserver's answer: objects, lists, Status
from gpushare.kube.errors import ApiError

Params = dict[str, str] | None  # a request's query


def decode(status: int, reason: str, raw: bytes | None) -> Json:
    """An apiserver's answer: JSON (or text), or ApiError with its Status reason and message."""
    text = (raw or b"").decode("utf-8", "replace")
    if status >= 400:
        try:
            answer = json.loads(text)
            raise ApiError(status, answer.get("reason", ""), answer.get("message", text))
        except (ValueError, AttributeError):
            raise ApiError(status, reason, text) from None
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class Verbs:
    """The calls gpushare makes, in terms of a client's ``request`` (ours or the official).

    ``timeout`` (seconds, per request) may be changed between calls: a grade asks ``/version``
    with a short one, then reads with a longer one.
    """

    timeout: float
    server: str  # the apiserver's URL, as results record it

    def close(self) -> None:
        """Let go of this thread's connection (the next call opens a new one)."""

    def request(
        self,
        method: str,
        path: str,
        body: Json = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Json:
        """One API call, JSON in and out."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        return decode(*self._send(method, path, body, headers, params))

    def _send(
        self, method: str, path: str, body: Json, headers: dict[str, str], params: Params
    ) -> tuple[int, str, bytes | None]:
        """The request as this client sends it: (status, reason, body) of the answer."""
        raise NotImplementedError

    def get(self, path: str, **params: str) -> Json:
        return self.request("GET", path, params=params or None)

    def get_or_none(self, path: str) -> Json:
        """GET, but a 404 is ``None`` rather than an error: absence is an answer in grading."""
        return self._absent_is_none("GET", path)

    def create(self, path: str, body: Json, *, dry_run: bool = False) -> Json:
        return self.request("POST", path, body, params={"dryRun": "All"} if dry_run else None)

    def replace(self, path: str, body: Json) -> Json:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: Json) -> Json:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> Json:
        """DELETE; a 404 (already gone) is ``None``."""
        return self._absent_is_none("DELETE", path)

    def _absent_is_none(self, method: str, path: str) -> Json:
        try:
            return self.request(method, path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
