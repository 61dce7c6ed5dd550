"""A throwaway certificate authority for the TLS tests (issue 34): a CA and the certificates it signs, made with
``cryptography`` (in the lock as a dependency of Airflow), written as PEM files under a test's directory.

    ca = TestCA.create(tmp_path / "tls")
    server = ca.issue("broker", hosts=["localhost", "127.0.0.1"])          # server certificate
    client = ca.issue("alice", client=True)                                # client certificate (mTLS)
    stale = ca.issue("broker-old", hosts=["localhost"], expired=True)      # not valid any more
    other = TestCA.create(tmp_path / "other")                              # a CA nobody trusts

``Issued`` carries the paths (``cert``, ``key``, ``ca``) and the PEM text (``cert_pem``, ``key_pem``), and
``keystore(password)`` writes a PKCS#12 bundle for the JVM (Kafka reads PEM too: ``ssl.keystore.type=PEM``).
Keys are unencrypted unless ``key_password`` is given. Nothing here is fast to make twice: session-scope it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Issued", "TestCA"]

_DAY = dt.timedelta(days=1)


def _key():  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key, password: str | None) -> bytes:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))


@dataclass(frozen=True)
class Issued:
    """A certificate the CA signed: ``cert``/``key`` paths (PEM), ``ca`` the CA's certificate path."""

    name: str
    cert: Path
    key: Path
    ca: Path
    key_password: str | None = None

    @property
    def cert_pem(self) -> str:
        return self.cert.read_text()

    @property
    def key_pem(self) -> str:
        return self.key.read_text()

    @property
    def ca_pem(self) -> str:
        return self.ca.read_text()

    def keystore(self, password: str) -> Path:
        """The certificate, its key and the CA chain as a PKCS#12 file (``<name>.p12``) for the JVM."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        key = serialization.load_pem_private_key(self.key.read_bytes(),
                                                 self.key_password.encode() if self.key_password else None)
        cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        ca = x509.load_pem_x509_certificate(self.ca.read_bytes())
        out = self.cert.with_suffix(".p12")
        out.write_bytes(pkcs12.serialize_key_and_certificates(
            self.name.encode(), key, cert, [ca],  # type: ignore[arg-type]
            serialization.BestAvailableEncryption(password.encode())))
        return out


class TestCA:
    """A self-signed CA in ``directory`` (``ca.pem``, ``ca.key``) that issues certificates into it."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, key, cert) -> None:  # type: ignore[no-untyped-def]
        self.directory, self._key, self._cert = directory, key, cert
        self.cert_path = directory / "ca.pem"

    @property
    def pem(self) -> str:
        return self.cert_path.read_text()

    @classmethod
    def create(cls, directory: Path, name: str = "pyconnect test CA") -> TestCA:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import NameOID

        directory.mkdir(parents=True, exist_ok=True)
        key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - _DAY)
                .not_valid_after(now + 365 * _DAY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        (directory / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / "ca.key").write_bytes(_key_pem(key, None))
        return cls(directory, key, cert)

    def issue(self, name: str, *, hosts: list[str] | None = None, client: bool = False, expired: bool = False,
              key_password: str | None = None) -> Issued:
        """A certificate with common name ``name`` (``CN=<name>``: a client certificate's Kafka principal is
        ``User:CN=<name>``) for ``hosts`` (DNS names or IP addresses in its subjectAltName; default
        ``localhost`` and ``127.0.0.1``), for a server, or for a client with ``client=True``; ``expired``: its
        validity ended yesterday. Written to ``<name>.pem`` / ``<name>.key``."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = _key()
        now = dt.datetime.now(dt.UTC)
        start, end = (now - 30 * _DAY, now - _DAY) if expired else (now - _DAY, now + 365 * _DAY)
        sans: list[x509.GeneralName] = []
        for host in hosts if hosts is not None else ["localhost", "127.0.0.1"]:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.CLIENT_AUTH] if client
                       else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key, key_password))
        key_path.chmod(0o600)
        return Issued(name, cert_path, key_path, self.cert_path, key_password)
