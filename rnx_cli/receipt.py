"""`rnx receipt verify`: check a gate server's signed receipt offline, with its public key."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import jwt

from rnx.errors import UserError

_JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
CLAIMS = ["run_id", "tier", "repository", "sha", "body_sha256", "iat"]


def _read_receipt(arg: str) -> str:
    if arg == "-":
        return sys.stdin.read().strip()
    path = Path(arg)
    try:
        is_file = path.is_file()
    except OSError:  # e.g. a JWT longer than a file name may be
        is_file = False
    if is_file:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise UserError(f"cannot read receipt file {arg}: {e.strerror}") from None
        # A saved upload answer carries the receipt in its "receipt" field.
        if text.startswith("{"):
            try:
                return str(json.loads(text)["receipt"])
            except (ValueError, KeyError, TypeError):
                raise UserError(f"{arg} is JSON without a 'receipt' field") from None
        return text
    if _JWT.match(arg.strip()):
        return arg.strip()
    raise UserError(f"{arg[:60]!r} is neither a receipt (a JWT) nor a file that holds one")


def _key_from_url(url: str) -> str:
    import httpx

    endpoint = url.rstrip("/") + "/api/v1/receipt-key"
    try:
        response = httpx.get(endpoint, timeout=10)
        response.raise_for_status()
        return str(response.json()["public_key_pem"])
    except (httpx.HTTPError, ValueError, KeyError) as e:
        raise UserError(f"cannot fetch the receipt key from {endpoint}: {e}") from None


def key_algorithm(public_key_pem: str) -> str:
    """The one JWT algorithm a receipt signed by this key can use (EdDSA or RS256): a receipt
    must be signed with its key's own algorithm, whatever its header claims."""
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(public_key_pem.encode("ascii", "replace"))
    except ValueError as e:
        raise UserError(f"the public key is not usable: not a PEM public key ({e})") from None
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "EdDSA"
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    raise UserError(
        f"the public key is a {type(key).__name__}; receipts are signed with Ed25519 or RSA keys"
    )


def verify(receipt: str, public_key_pem: str) -> dict[str, Any]:
    """The receipt's claims; raises jwt.InvalidTokenError when it is forged or malformed."""
    algorithm = key_algorithm(public_key_pem)
    try:
        claimed = jwt.get_unverified_header(receipt).get("alg")
    except jwt.InvalidTokenError:
        claimed = None  # decode below says what is wrong with it
    if claimed is not None and claimed != algorithm:
        raise jwt.InvalidAlgorithmError(
            f"the receipt says it is signed with {claimed!r}, but the key is for {algorithm}"
        )
    claims: dict[str, Any] = jwt.decode(
        receipt,
        public_key_pem,
        algorithms=[algorithm],
        options={"require": CLAIMS, "verify_aud": False},
    )
    return claims


def _scope_mismatch(
    claims: dict[str, Any], workspace: str | None, github_id: int | None
) -> str | None:
    """Why the receipt is not of this workspace or repository (None when it is): the same
    OWNER/NAME can be registered in several workspaces, each getting receipts for it."""
    if workspace is not None and claims.get("workspace") != workspace:
        found = claims.get("workspace")
        named = f"workspace {found!r}" if found else "no workspace (an older server signed it)"
        return f"the receipt is of {named}, not of workspace {workspace!r}"
    found = claims.get("github_repository_id")
    if github_id is not None and found is None:
        return (
            f"the receipt names no GitHub repository id (the server did not know it), so it "
            f"cannot show it is of GitHub repository id {github_id}"
        )
    if github_id is not None and found != github_id:
        return f"the receipt is of GitHub repository id {found}, not of {github_id}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx receipt", description="Verify a receipt signed by a gate server."
    )
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("verify", help="check a receipt's signature; exit 1 if it is not valid")
    check.add_argument("receipt", help="the JWT, a file holding it (or an upload answer), or -")
    source = check.add_mutually_exclusive_group(required=True)
    source.add_argument("--key", help="the server's public key (PEM file)")
    source.add_argument("--url", help="the server; its key is read from /api/v1/receipt-key")
    check.add_argument("--results", help="also check that the receipt covers this uploaded file")
    check.add_argument(
        "--workspace", help="also check that the receipt is of this workspace of the server"
    )
    check.add_argument(
        "--github-repository-id",
        type=int,
        help="also check GitHub's id of the repository (GET /repos/OWNER/NAME); the server "
        "knows it in App mode, from OIDC uploads or `rnx repo bind`",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    if args.key:
        try:
            key = Path(args.key).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"cannot read public key {args.key}: {e}") from None
    else:
        key = _key_from_url(args.url)
    receipt = _read_receipt(args.receipt)
    try:
        claims = verify(receipt, key)
    except jwt.InvalidKeyError as e:
        raise UserError(f"the public key is not usable: {e}") from None
    except jwt.InvalidTokenError as e:
        print(f"rnx receipt: INVALID: {e}", file=sys.stderr)
        return 1
    if args.results:
        try:
            data = Path(args.results).read_bytes()
        except OSError as e:
            raise UserError(f"cannot read {args.results}: {e.strerror}") from None
        if hashlib.sha256(data).hexdigest() != claims["body_sha256"]:
            print(
                f"rnx receipt: INVALID: {args.results} is not the document this receipt covers "
                "(its sha256 differs from body_sha256)",
                file=sys.stderr,
            )
            return 1
    mismatch = _scope_mismatch(claims, args.workspace, args.github_repository_id)
    if mismatch:
        print(f"rnx receipt: INVALID: {mismatch}", file=sys.stderr)
        return 1
    print(json.dumps(claims, indent=2, sort_keys=True))
    print(f"rnx receipt: valid: run {claims['run_id']} was gated {claims['tier']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
