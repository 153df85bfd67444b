"""Console sign-in with throttling: repeated failures for one username or one client address lock
sign-in for a window (settings LOGIN_MAX_FAILURES, LOGIN_WINDOW_S), so passwords cannot be guessed
at the speed of the server."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

__all__ = ("ThrottledLoginView",)

logger = logging.getLogger(__name__)


def _keys(request: HttpRequest) -> list[str]:
    """Cache keys of the failure counters this attempt counts against (address, username)."""
    address = request.META.get("REMOTE_ADDR", "") or "unknown"
    username = str(request.POST.get("username", "")).strip().lower()
    keys = [f"login-fail:addr:{address}"]
    if username:  # hashed: cache keys must be short and plain ASCII, usernames need not be
        keys.append("login-fail:user:" + hashlib.sha256(username.encode()).hexdigest()[:32])
    return keys


class ThrottledLoginView(LoginView):
    """Django's LoginView; a locked client gets 429 and the form with a one-line explanation."""

    template_name = "registration/login.html"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        keys = _keys(request)
        limit = int(settings.LOGIN_MAX_FAILURES)
        if any(int(cache.get(k, 0)) >= limit for k in keys):
            minutes = max(1, round(int(settings.LOGIN_WINDOW_S) / 60))
            # An unbound form: a bound one would check the password, which is what is locked.
            form = self.get_form_class()(request, initial={"username": request.POST.get("username", "")})
            logger.warning("sign-in locked for %s", request.META.get("REMOTE_ADDR", "unknown"))
            context = self.get_context_data(
                form=form, throttled=f"Too many failed sign-ins. Try again in {minutes} minutes."
            )
            return self.render_to_response(context, status=429)
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:  # the form came back: wrong credentials
            window = int(settings.LOGIN_WINDOW_S)
            for key in keys:
                cache.add(key, 0, window)  # the window starts at the first failure
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr
                    cache.set(key, 1, window)
        return response
