"""A secured Apache Kafka 4.4.0 node for the tests (issue 34): TLS everywhere, three ways in, an authorizer.

One KRaft node (broker and controller in one JVM), formatted and started as
:class:`~tests.support.kafka_broker.ApacheKafkaBroker` does (same jars, JVM options, template, bounded start and
clean stop), with these listeners on loopback:

- ``SASL`` (``SASL_SSL``): SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN. The SCRAM users ``admin`` and ``alice`` are
  created at format time (``kafka-storage format --add-scram``); :meth:`SecuredKafka.add_user` adds more later
  (``AdminClient.alter_user_scram_credentials``). PLAIN users are fixed in the broker's JAAS line: ``admin`` and
  ``alice``, with the same passwords as their SCRAM credentials.
- ``MTLS`` (``SSL``, ``ssl.client.auth=required``): a client certificate signed by the fixture's CA. The
  principal is ``User:<CN>`` (``ssl.principal.mapping.rules`` maps ``CN=alice`` to ``User:alice``), so one name
  means the same principal on every listener. :meth:`SecuredKafka.issue` makes client certificates.
- ``OAUTH`` (``SASL_SSL``): OAUTHBEARER checked by Kafka's default unsecured validator (JWS ``alg: none``,
  ``sub`` is the principal, ``exp`` required).
- ``CONTROLLER`` (``SSL``, client certificate required): the broker reaches its controller with its own
  certificate, ``User:broker``; the inter-broker listener is ``MTLS``.

The ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``; ``User:admin`` and ``User:broker`` are
super users. Any other principal may do nothing until :meth:`SecuredKafka.grant` lets it.

The broker's certificate (``CN=broker``, for ``localhost`` and ``127.0.0.1``) comes from
:class:`tests.support.tls.TestCA`; the JVM reads it as PKCS#12 and trusts the CA as a PEM file. The client side
verifies the broker's name (librdkafka's default ``ssl.endpoint.identification.algorithm=https``).

``kafka_secure`` (session scope) yields a started :class:`SecuredKafka`; tests share it with unique principals,
topics and groups. Every wait is bounded and names what it waited for.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_broker import ApacheKafkaBroker, _java_and_libs
from tests.support.ports import free_port
from tests.support.tls import Issued, TestCA

__all__ = [
    "ADMIN",
    "OAUTH_CB",
    "SCRAM_MECHANISMS",
    "USERS",
    "SecuredKafka",
    "TokenEndpoint",
    "committed_ids",
    "fixed_jwt",
    "kafka_secure",
    "oauth_token",
    "sunk_ids",
    "unsecured_jwt",
]

ADMIN = "admin"
USERS = (ADMIN, "alice")
"""SCRAM (both mechanisms) and PLAIN users that exist from the start."""
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 8192
OAUTH_CB = "tests.support.kafka_secure.oauth_token"
""":func:`oauth_token`'s dotted path, as a connection's extra names it (``oauth_cb``)."""
WAIT_S = 30.0
"""How long an ACL or a user may take to reach the broker's authorizer or credential cache."""


def unsecured_jwt(principal: str, lifetime_s: float = 3600.0, **claims: Any) -> tuple[str, float]:
    """An unsecured JWS (``alg: none``) for ``principal`` that Kafka's default OAUTHBEARER validator accepts,
    and its expiry in epoch seconds: what an ``oauth_cb`` returns."""
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    now = time.time()
    expiry = now + lifetime_s
    body = {"sub": principal, "iat": int(now), "exp": int(expiry), **claims}
    return f"{part({'alg': 'none'})}.{part(body)}.", expiry


def oauth_token(config: str | None) -> tuple[str, float]:
    """An ``oauth_cb`` (confluent-kafka's convention: called with ``sasl.oauthbearer.config``, returns ``(token,
    expiry in epoch seconds)``; None when the setting is not given): an unsecured token for the ``principal=<name>``
    the config names, ``admin`` if none. Named by its dotted path ``tests.support.kafka_secure.oauth_token`` in a connection's extra. With
    ``$PYCONNECT_TEST_OAUTH_EXPIRY`` set (epoch seconds), tokens expire then and carry the claim ``jti`` from
    ``$PYCONNECT_TEST_OAUTH_JTI``, so that a test that runs this in another process knows the token to look for."""
    fields = dict(part.split("=", 1) for part in (config or "").split() if "=" in part)
    expiry = os.environ.get("PYCONNECT_TEST_OAUTH_EXPIRY")
    if expiry is None:
        return unsecured_jwt(fields.get("principal", ADMIN))
    return fixed_jwt(fields.get("principal", ADMIN), float(expiry), os.environ.get("PYCONNECT_TEST_OAUTH_JTI", ""))


def failing_oauth_token(config: str | None) -> tuple[str, float]:
    """An ``oauth_cb`` whose token service is down: it raises."""
    raise RuntimeError(f"the token service is down (asked with {config!r})")


def fixed_jwt(principal: str, expiry: float, jti: str) -> tuple[str, float]:
    """An unsecured JWS for ``principal`` that expires at ``expiry`` (epoch seconds): the same text wherever and
    whenever it is made."""
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': principal, 'exp': int(expiry), 'jti': jti})}.", float(int(expiry))


class TokenEndpoint:
    """A tiny OAuth token endpoint on loopback (HTTP, in a thread) for librdkafka's
    ``sasl.oauthbearer.method=oidc``: a ``client_credentials`` POST with the right client id and secret (HTTP
    basic auth) gets an unsecured JWT for ``principal``; anything else gets 401. ``issued`` lists the tokens."""

    def __init__(self, principal: str = ADMIN) -> None:
        self.principal = principal
        self.client_id = "pyconnect-client"
        self.client_secret = f"client-secret-{secrets.token_hex(8)}"
        self.issued: list[str] = []
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/token"

    def settings(self) -> dict[str, str]:
        """The librdkafka OIDC settings that get tokens here."""
        return {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": self.client_id,
                "sasl.oauthbearer.client.secret": self.client_secret, "sasl.oauthbearer.token.endpoint.url": self.url}

    def __enter__(self) -> TokenEndpoint:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        endpoint = self
        expected = "Basic " + base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if self.headers.get("Authorization") != expected or "grant_type=client_credentials" not in body:
                    self.send_response(401)
                    self.end_headers()
                    return
                token, expiry = unsecured_jwt(endpoint.principal)
                endpoint.issued.append(token)
                out = json.dumps({"access_token": token, "token_type": "bearer",
                                  "expires_in": int(expiry - time.time())}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="oauth-token-endpoint", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class Listener:
    """One listener of the node: its name in ``server.properties``, its security protocol and port."""

    name: str
    protocol: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class SecuredKafka(ApacheKafkaBroker):
    """The secured node (see the module docstring). ``bootstrap``/``url`` name the ``SASL`` listener;
    :meth:`listener` the others."""

    def __init__(self, work_dir: Path, java: str, libs: Path) -> None:
        super().__init__(work_dir, java, libs)
        self.ca = TestCA.create(work_dir / "tls")
        self.server_cert = self.ca.issue("broker", hosts=["localhost", "127.0.0.1"])
        self._store_password = secrets.token_hex(8)
        self._keystore = self.server_cert.keystore(self._store_password)
        self.passwords = {user: f"{user}-{secrets.token_hex(8)}" for user in USERS}
        self.mtls_port = 0
        self.oauth_port = 0
        self._foreign: TestCA | None = None
        self._admin: Any = None

    # -- configuration ------------------------------------------------------------------------------------
    def _more_properties(self) -> str:
        self.mtls_port, self.oauth_port = free_port(), free_port()
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.passwords.items())
        listeners = ",".join(f"{x.name}://{x.bootstrap}" for x in self.listeners())
        advertised = ",".join(f"{x.name}://{x.bootstrap}" for x in self.listeners() if x.name != "CONTROLLER")
        protocols = ",".join(f"{x.name}:{x.protocol}" for x in self.listeners())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return f"""
# --- tests/support/kafka_secure.py: TLS everywhere, SASL (SCRAM, PLAIN), mTLS, OAUTHBEARER, an authorizer ---
listeners={listeners}
advertised.listeners={advertised}
listener.security.protocol.map={protocols}
inter.broker.listener.name=MTLS
controller.listener.names=CONTROLLER

ssl.keystore.type=PKCS12
ssl.keystore.location={self._keystore}
ssl.keystore.password={self._store_password}
ssl.key.password={self._store_password}
ssl.truststore.type=PEM
ssl.truststore.location={self.ca.cert_path}
ssl.endpoint.identification.algorithm=https
listener.name.mtls.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT

sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl.scram-sha-256.sasl.jaas.config={scram}
listener.name.sasl.scram-sha-512.sasl.jaas.config={scram}
listener.name.sasl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="{ADMIN}";

authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:{ADMIN};User:broker
"""

    def _format_options(self) -> list[str]:
        options = []
        for user, password in self.passwords.items():
            for mechanism in SCRAM_MECHANISMS:
                options += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return options

    def listeners(self) -> list[Listener]:
        return [Listener("SASL", "SASL_SSL", self.port), Listener("MTLS", "SSL", self.mtls_port),
                Listener("OAUTH", "SASL_SSL", self.oauth_port), Listener("CONTROLLER", "SSL", self.controller_port)]

    def listener(self, name: str) -> Listener:
        """The listener called ``name`` (``SASL``, ``MTLS``, ``OAUTH``)."""
        return next(x for x in self.listeners() if x.name == name.upper())

    # -- client settings (librdkafka) ------------------------------------------------------------------------
    def client_settings(self) -> dict[str, str]:
        """The admin super user over SCRAM-SHA-512: what the fixture itself uses."""
        return self.sasl_settings(ADMIN)

    def sasl_settings(self, user: str, mechanism: str = "SCRAM-SHA-512", password: str | None = None) -> dict[str, str]:
        """``user`` over SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN on the ``SASL`` listener, trusting the CA."""
        return {"bootstrap.servers": self.listener("SASL").bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": self.passwords[user] if password is None else password,
                "ssl.ca.location": str(self.ca.cert_path)}

    def certificate_settings(self, cert: Issued, *, inline: bool = False) -> dict[str, str]:
        """A client certificate on the ``MTLS`` listener: file paths (``ssl.*.location``), or the PEM text
        itself with ``inline`` (``ssl.certificate.pem``, ``ssl.key.pem``, ``ssl.ca.pem``); an encrypted key's
        password as ``ssl.key.password``."""
        settings = {"bootstrap.servers": self.listener("MTLS").bootstrap, "security.protocol": "SSL"}
        if inline:
            settings.update({"ssl.certificate.pem": cert.cert_pem, "ssl.key.pem": cert.key_pem,
                             "ssl.ca.pem": self.ca.pem})
        else:
            settings.update({"ssl.certificate.location": str(cert.cert), "ssl.key.location": str(cert.key),
                             "ssl.ca.location": str(self.ca.cert_path)})
        if cert.key_password:
            settings["ssl.key.password"] = cert.key_password
        return settings

    def oauth_settings(self, principal: str | None = None) -> dict[str, str]:
        """OAUTHBEARER on the ``OAUTH`` listener, trusting the CA. With ``principal``, librdkafka makes its own
        unsecured token for it (``enable.sasl.oauthbearer.unsecure.jwt``); without, the caller adds the token
        source (``oauth_cb``, or ``sasl.oauthbearer.method=oidc`` and its endpoint)."""
        settings = {"bootstrap.servers": self.listener("OAUTH").bootstrap, "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "OAUTHBEARER", "ssl.ca.location": str(self.ca.cert_path)}
        if principal is not None:
            settings.update({"enable.sasl.oauthbearer.unsecure.jwt": "true",
                             "sasl.oauthbearer.config": f"principal={principal}"})
        return settings

    def issue(self, name: str, *, expired: bool = False, key_password: str | None = None) -> Issued:
        """A client certificate ``CN=<name>`` (principal ``User:<name>``) signed by the broker's CA."""
        return self.ca.issue(name, client=True, expired=expired, key_password=key_password)

    @property
    def foreign_ca(self) -> TestCA:
        """A CA the broker does not trust (and whose certificates it refuses)."""
        if self._foreign is None:
            self._foreign = TestCA.create(self.work_dir / "foreign-tls", name="someone else's CA")
        return self._foreign

    # -- users and ACLs (as the admin) ---------------------------------------------------------------------
    def admin(self) -> Any:
        """The fixture's AdminClient as the super user (one per node, kept: a future outlives no client)."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({**self.client_settings(), "log_level": 0})
        return self._admin

    def add_user(self, user: str, password: str | None = None) -> str:
        """Create (or change) the SCRAM-SHA-256 and -512 credentials of ``user``; returns the password once
        ``user`` authenticates with it (bounded by WAIT_S). PLAIN users cannot be added to a running node."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        password = password or f"{user}-{secrets.token_hex(8)}"
        for mechanism_id in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):  # one per request
            upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism_id, SCRAM_ITERATIONS),
                                                  password.encode())
            for future in self.admin().alter_user_scram_credentials([upsert]).values():
                future.result(WAIT_S)
        self.passwords[user] = password
        for mechanism in SCRAM_MECHANISMS:
            self._wait_until_authenticates(self.sasl_settings(user, mechanism), f"{user} over {mechanism}")
        return password

    def _wait_until_authenticates(self, settings: dict[str, str], who: str) -> None:
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + WAIT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            client = AdminClient({**settings, "log_level": 0})
            try:
                client.list_topics(timeout=5)
                return
            except ck.KafkaException as exc:
                last = exc
            time.sleep(0.2)
        pytest.fail(f"{who} did not authenticate on {settings['bootstrap.servers']} within {WAIT_S:g} s: {last}",
                    pytrace=False)

    def grant(self, principal: str, resource_type: str, name: str, operation: str, *, pattern: str = "literal",
              allow: bool = True, host: str = "*") -> None:
        """Add the ACL (``principal`` is ``User:alice`` or ``alice``; ``resource_type`` ``topic``, ``group``,
        ``transactional_id``, ``cluster`` (name ``kafka-cluster``); ``operation`` ``read``, ``write``,
        ``describe``, ``create``, ``idempotent_write``, ``all`` ...; ``pattern`` ``literal`` or ``prefixed``) and
        wait (bounded) until the broker's authorizer has it."""
        binding = self._binding(principal, resource_type, name, operation, pattern, allow, host)
        for future in self.admin().create_acls([binding]).values():
            future.result(WAIT_S)
        self._wait_for_acl(binding, present=True)

    def revoke(self, principal: str, resource_type: str, name: str, operation: str, *, pattern: str = "literal",
               allow: bool = True, host: str = "*") -> None:
        """Remove the ACL :meth:`grant` added (same arguments); wait (bounded) until the authorizer lost it."""
        from confluent_kafka.admin import AclBindingFilter

        binding = self._binding(principal, resource_type, name, operation, pattern, allow, host)
        exact = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                                 binding.host, binding.operation, binding.permission_type)
        for future in self.admin().delete_acls([exact]).values():
            future.result(WAIT_S)
        self._wait_for_acl(binding, present=False)

    def acls(self, principal: str | None = None) -> list[Any]:
        """Every ACL binding (of ``principal`` if given) the broker holds."""
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        wanted = None if principal is None else _principal(principal)
        any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, wanted, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        return list(self.admin().describe_acls(any_filter).result(WAIT_S))

    def _wait_for_acl(self, binding: Any, *, present: bool) -> None:
        deadline = time.monotonic() + WAIT_S
        while (binding in self.acls(binding.principal)) != present:
            if time.monotonic() >= deadline:
                pytest.fail(f"the ACL {binding} was {'not added' if present else 'not removed'} within "
                            f"{WAIT_S:g} s", pytrace=False)
            time.sleep(0.1)

    @staticmethod
    def _binding(principal: str, resource_type: str, name: str, operation: str, pattern: str, allow: bool,
                 host: str) -> Any:
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        return AclBinding(ResourceType[resource_type.upper()], name, ResourcePatternType[pattern.upper()],
                          _principal(principal), host, AclOperation[operation.upper()],
                          AclPermissionType.ALLOW if allow else AclPermissionType.DENY)


def committed_ids(broker: SecuredKafka, topic: str, partitions: int) -> list[int]:
    """The ``id`` of every JSON record of ``topic`` a ``read_committed`` reader sees (as the admin), to each
    partition's end, sorted (bounded: 600 polls of at most 0.5 s)."""
    import confluent_kafka as ck

    consumer = ck.Consumer({**broker.client_settings(), "group.id": secrets.token_hex(8), "log_level": 0,
                            "isolation.level": "read_committed", "enable.partition.eof": True,
                            "auto.offset.reset": "earliest"})
    ids: list[int] = []
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        ended: set[int] = set()
        for _ in range(600):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                ended.add(msg.partition())
                if len(ended) == partitions:
                    return sorted(ids)
                continue
            ids.append(json.loads(msg.value())["id"])
        raise AssertionError(f"{topic}: not every partition reached its end within 600 polls: {sorted(ended)}")
    finally:
        consumer.close()


def sunk_ids(directory: Path, topic: str) -> list[int]:
    """The ``id`` of every record a FileSink (``format: jsonl``) wrote for ``topic`` under ``directory``, sorted."""
    return sorted(json.loads(line)["id"] for path in (directory / topic).glob("partition=*/*.jsonl")
                  for line in path.read_text().splitlines() if line.strip())


def _principal(principal: str) -> str:
    return principal if ":" in principal else f"User:{principal}"


@pytest.fixture(scope="session")
def kafka_secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """The session's secured Apache Kafka node (started on first use, stopped at the end)."""
    java, libs = _java_and_libs()
    broker = SecuredKafka(tmp_path_factory.mktemp("kafka-secure"), java, libs)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
