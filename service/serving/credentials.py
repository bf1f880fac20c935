"""Secrets and certificates for the server and the `gpu-advisor` command.

A secret never comes from a flag's value (argv shows in `ps` and in /proc to every local user): the admin token
comes from the environment or a file, TLS keys from files.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

import grpc

TOKEN_ENV = "GPU_ADVISOR_ADMIN_TOKEN"


class ConfigError(ValueError):
    """A start-up setting that cannot work; the message says which and why."""


def read_secret_file(path: str, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(f"{what} {path}: {err.strerror or err}") from None
    if not data.strip():
        raise ConfigError(f"{what} {path}: the file is empty")
    return data


def admin_token(env: Mapping[str, str], token_file: str | None) -> str:
    """The admin token from GPU_ADVISOR_ADMIN_TOKEN or a file (trailing newline ignored); "" when neither is set,
    which turns the admin RPCs off."""
    from_env = env.get(TOKEN_ENV, "").strip()
    if token_file:
        if from_env:
            raise ConfigError(f"the admin token is set twice: {TOKEN_ENV} and --admin-token-file; keep one")
        return read_secret_file(token_file, "admin token file").decode("utf-8").strip()
    return from_env


def server_credentials(cert: str | None, key: str | None, client_ca: str | None) -> grpc.ServerCredentials | None:
    """TLS when a certificate and key are given; with a client CA, callers must show a certificate it signed
    (mTLS). None (plaintext) when none of the three is set."""
    if not (cert or key or client_ca):
        return None
    if not (cert and key):
        raise ConfigError("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)")
    ca = read_secret_file(client_ca, "TLS client CA") if client_ca else None
    pair = (read_secret_file(key, "TLS key"), read_secret_file(cert, "TLS certificate"))
    _check_tls_files(cert, key, client_ca)
    return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)


def _check_tls_files(cert: str, key: str, client_ca: str | None) -> None:
    """Say which file is wrong and how before gRPC tries them: a key that does not match its certificate or a
    client CA that is not PEM only made gRPC fail to bind ("address in use")."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key, password=lambda: b"")  # an encrypted key fails here, never prompts
    except ssl.SSLError as err:
        reason = err.reason or ""
        if "KEY_VALUES_MISMATCH" in reason:
            raise ConfigError(f"TLS key {key} does not belong to the certificate {cert}") from None
        if "BAD_DECRYPT" in reason or "BAD_PASSWORD" in reason or "PROCESSING_ERROR" in reason:
            raise ConfigError(f"TLS key {key} is encrypted; the server needs an unencrypted PEM key") from None
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert)
        except ssl.SSLError:
            raise ConfigError(f"TLS certificate {cert} is not a PEM certificate") from None
        raise ConfigError(f"TLS key {key} is not a PEM private key for {cert} ({reason or 'unreadable'})") from None
    if client_ca:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=client_ca)
        except ssl.SSLError:
            raise ConfigError(f"TLS client CA {client_ca} is not a PEM certificate") from None


def channel_credentials(ca: str | None, cert: str | None, key: str | None) -> grpc.ChannelCredentials:
    """Client side: trust `ca` (else the system roots); present `cert`/`key` when the server asks for mTLS."""
    if bool(cert) != bool(key):
        raise ConfigError("a client certificate needs its key, and a key its certificate")
    return grpc.ssl_channel_credentials(
        root_certificates=read_secret_file(ca, "TLS CA") if ca else None,
        private_key=read_secret_file(key, "TLS key") if key else None,
        certificate_chain=read_secret_file(cert, "TLS certificate") if cert else None,
    )
