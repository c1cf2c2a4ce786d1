"""Self-signed CA + serving certificate for the webhook (``gangcheck certs``), with ``cryptography``.

The API server calls the webhook at ``https://<service>.<namespace>.svc:443`` and verifies the
serving certificate against the ``caBundle`` of the Validating/MutatingWebhookConfiguration
(base64 of the PEM CA certificate). ``generate`` writes, into ``out_dir``:

- ``ca.crt`` / ``ca.key``: a CA (ECDSA P-256, basicConstraints CA:TRUE, keyCertSign),
- ``tls.crt`` / ``tls.key``: the serving certificate signed by it (serverAuth) with DNS SANs
  NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local, localhost and the IP SAN 127.0.0.1,

and returns the caBundle. Key files are written 0600. Files are replaced atomically (write to a
temporary file, then rename), so a server polling them never reads half a file.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import ipaddress
import os
import sys
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["generate", "sans_for", "main", "build_parser"]

CA_DAYS = 3650
SERVING_DAYS = 365
#: The shortest serving certificate ``--days`` allows (0 or less would be expired when written).
MIN_DAYS = 1


def sans_for(service: str, namespace: str) -> list[str]:
    """The DNS names in the serving certificate (IP SAN 127.0.0.1 is added separately)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    ]


def _write(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def generate(
    service: str = "gangcheck",
    namespace: str = "gangcheck-system",
    out_dir: str | os.PathLike = "certs",
    *,
    days: int = SERVING_DAYS,
    reuse_ca: bool = False,
) -> str:
    """Create (or replace) ca.crt, ca.key, tls.crt, tls.key in ``out_dir``; return the caBundle.

    Args:
        service, namespace: the webhook Service's name and namespace (they make the SANs).
        out_dir: directory, created if missing.
        days: validity of the serving certificate, ``MIN_DAYS`` (1) to ``CA_DAYS`` (3650: the
            CA's own validity).
        reuse_ca: keep an existing ca.crt/ca.key and only issue a new serving certificate
            (a rotation that does not change the caBundle).

    Returns:
        base64 of the PEM ``ca.crt``: the ``caBundle`` for the webhook configurations.

    Raises:
        OSError: the directory or files cannot be written (the message names the path).
        ValueError: empty service/namespace, ``days`` out of range, or with ``reuse_ca`` a
            ca.crt/ca.key that does not load or does not match (the message names the file).
    """
    if not service or not namespace:
        raise ValueError("service and namespace must be non-empty")
    if isinstance(days, bool) or not isinstance(days, int) or not MIN_DAYS <= days <= CA_DAYS:
        raise ValueError(f"days: expected a whole number of days from {MIN_DAYS} to {CA_DAYS} (the CA's validity), got {days!r}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(f"{out}: exists and is not a directory") from None
    except OSError as exc:
        raise OSError(f"{out}: cannot create the directory: {exc.strerror or exc}") from None
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)

    ca_crt_path, ca_key_path = out / "ca.crt", out / "ca.key"
    if reuse_ca and ca_crt_path.exists() and ca_key_path.exists():
        ca_pem = ca_crt_path.read_bytes()
        try:
            ca_cert = x509.load_pem_x509_certificate(ca_pem)
        except ValueError:
            raise ValueError(f"{ca_crt_path}: not a PEM certificate (--reuse-ca needs the CA written by `gangcheck certs`)") from None
        try:
            ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
        except (ValueError, TypeError):
            raise ValueError(f"{ca_key_path}: not an unencrypted PEM private key (--reuse-ca needs the CA key written by `gangcheck certs`)") from None
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey) or ca_key.public_key().public_numbers() != ca_cert.public_key().public_numbers():
            raise ValueError(f"{ca_key_path}: is not the key of {ca_crt_path}")
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gangcheck-ca ({service}.{namespace})")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
        _write(ca_key_path, _key_pem(ca_key), 0o600)
        _write(ca_crt_path, ca_pem, 0o644)

    key = ec.generate_private_key(ec.SECP256R1())
    dns = sans_for(service, namespace)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    # Key first, then certificate: a poller that sees the new certificate also finds its key.
    _write(out / "tls.key", _key_pem(key), 0o600)
    _write(out / "tls.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return base64.b64encode(ca_pem).decode("ascii")


def _days(text: str) -> int:
    """argparse type of ``--days``: a whole number from ``MIN_DAYS`` to ``CA_DAYS``."""
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of days, got {text!r}") from None
    if not MIN_DAYS <= days <= CA_DAYS:
        raise argparse.ArgumentTypeError(f"expected {MIN_DAYS} to {CA_DAYS} days (the CA's validity), got {days}")
    return days


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add ``--service``, ``--namespace``, ``--out``, ``--days``, ``--reuse-ca`` to ``parser``."""
    p = parser or argparse.ArgumentParser(prog="gangcheck certs", description="Generate a CA and a webhook serving certificate.")
    p.add_argument("--service", default="gangcheck", metavar="NAME", help="the webhook Service's name (default gangcheck)")
    p.add_argument("--namespace", default="gangcheck-system", metavar="NAMESPACE",
                   help="the Service's namespace (default gangcheck-system)")
    p.add_argument("--out", default="certs", metavar="DIR", help="output directory, created if missing (default certs/)")
    p.add_argument("--days", type=_days, default=SERVING_DAYS, metavar="N",
                   help=f"serving certificate validity in days, {MIN_DAYS}-{CA_DAYS} (default {SERVING_DAYS}; the CA: {CA_DAYS})")
    p.add_argument("--reuse-ca", action="store_true",
                   help="keep the CA already in --out (a new one when there is none) and issue only a new serving "
                        "certificate: the caBundle stays the same, so the webhook configurations need no patch")
    return p


def main(argv: list[str] | None = None) -> int:
    """``gangcheck certs``: write the files and print the caBundle on stdout (one line).

    Returns the exit code: 0 on success, 1 when the files cannot be written (message on stderr).
    """
    args = build_parser().parse_args(argv)
    try:
        bundle = generate(args.service, args.namespace, args.out, days=args.days, reuse_ca=args.reuse_ca)
    except (OSError, ValueError) as exc:
        print(f"gangcheck certs: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}/ca.crt ca.key tls.crt tls.key for {args.service}.{args.namespace}.svc", file=sys.stderr)
    print(bundle)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
