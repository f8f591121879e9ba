"""The GitHub App's credentials (rnx_github/app_auth.py) against the GitHub fake: the app JWT and
installation tokens cached until shortly before they expire."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from rnx_github.app_auth import AppCredentials, GitHubApp, InstallationTokens, app_jwt
from testbed.fakes import fake_github
from testbed.fakes.github_endpoints import app_key, extras, private_pem, serve_with_app

REPO = "Codertocat/Hello-World"
INSTALLATION = 77
BOT = "rnx-gate[bot]"


@pytest.fixture
def github() -> Iterator[tuple[str, fake_github.State]]:
    with serve_with_app({REPO: INSTALLATION}) as served:
        yield served


class Clock:
    """A clock the test moves by hand, handed to InstallationTokens."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def test_installation_tokens_are_cached_until_shortly_before_expiry(
    github: tuple[str, fake_github.State],
) -> None:
    url, state = github
    extras(state).app.token_lifetime_s = 130  # type: ignore[union-attr]  # 10 s past the margin
    clock = Clock()
    tokens = InstallationTokens(AppCredentials("314", private_pem(app_key()), url), clock=clock)
    first = tokens.token(INSTALLATION)
    assert tokens.token(INSTALLATION) == first and tokens.exchanges == 1
    clock.t += 11  # now within the renewal margin
    second = tokens.token(INSTALLATION)
    assert second != first and tokens.exchanges == 2
    assert tokens.installation_for(REPO) == INSTALLATION
    assert [i for i, _ in extras(state).app.issued] == [INSTALLATION, INSTALLATION]  # type: ignore[union-attr]


def test_app_jwt_is_short_lived_and_refused_with_another_key(
    github: tuple[str, fake_github.State],
) -> None:
    url, _ = github
    token = app_jwt(AppCredentials("314", private_pem(app_key()), url), now=1_000_000)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims == {"iat": 1_000_000 - 60, "exp": 1_000_000 + 540, "iss": "314"}
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger_jwt = app_jwt(AppCredentials("314", private_pem(stranger), url))
    r = httpx.get(f"{url}/app", headers={"Authorization": f"Bearer {stranger_jwt}"})
    assert r.status_code == 401
    app = GitHubApp(AppCredentials("314", private_pem(app_key()), url))
    assert app.bot_login() == BOT
