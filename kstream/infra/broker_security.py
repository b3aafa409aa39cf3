"""The local broker's SASL_SSL listener: a certificate authority, SCRAM users, client settings.

``kstream broker start --security sasl-ssl`` makes, once per broker directory::

    <broker dir>/security/ca.p12             the self-signed CA (key and certificate)
    <broker dir>/security/ca.pem             its certificate: what clients trust
    <broker dir>/security/broker.p12         the broker's key and CA-signed certificate
                                             (SAN localhost and 127.0.0.1)
    <broker dir>/security/secrets.properties the keystore password and the users' passwords
    <broker dir>/client.properties           ready ``--kafka-config`` file for user `CLIENT_USER`
    <broker dir>/admin.properties            the same for the broker's own user `ADMIN_USER`

Certificates are made with Java's ``keytool``: the broker needs Java anyway,
so this adds no dependency, and its PKCS#12 keystore is what the broker reads
natively. Passwords reach keytool through the environment (``-storepass:env``),
never its argument list. The SCRAM-SHA-512 users exist from the moment storage
is formatted (``--add-scram``), so the broker never runs with an open door.
Files holding secrets are made readable by their owner only.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kstream.errors import BrokerError
from kstream.infra.paths import require_tool

__all__ = [
    "ADMIN_USER",
    "CLIENT_USER",
    "MECHANISM",
    "BrokerSecurity",
]

#: The user the broker authenticates as to itself (inter-broker listener) and its super user.
ADMIN_USER = "admin"
#: The user whose settings `client.properties` holds: what a job runs as.
CLIENT_USER = "kstream"
#: SCRAM with the strongest hash Kafka offers; librdkafka and Java both speak it.
MECHANISM = "SCRAM-SHA-512"
#: Certificates outlive any local broker; a test run should never meet an expired one.
VALIDITY_DAYS = 3650
#: Names the certificate is valid for: how clients on this machine reach the broker.
SUBJECT_ALT_NAMES = "SAN=dns:localhost,ip:127.0.0.1"
#: Bytes of randomness per password (URL-safe text: no quoting needed anywhere).
PASSWORD_BYTES = 24


def _private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by the owner only (created so, never world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _properties(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, _, v in pairs}


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """The SASL_SSL material of the local broker in `directory` (its broker directory)."""

    directory: Path

    @property
    def _dir(self) -> Path:
        return self.directory / "security"

    @property
    def ca_pem(self) -> Path:
        return self._dir / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self._dir / "broker.p12"

    @property
    def client_properties(self) -> Path:
        return self.directory / "client.properties"

    @property
    def admin_properties(self) -> Path:
        return self.directory / "admin.properties"

    @property
    def _secrets(self) -> Path:
        return self._dir / "secrets.properties"

    def exists(self) -> bool:
        return self._secrets.is_file() and self.keystore.is_file() and self.ca_pem.is_file()

    def ensure(self) -> None:
        """Make the CA, the broker's certificate, the passwords and the client files once."""
        if self.exists():
            return
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        values = {
            "keystore.password": secrets.token_urlsafe(PASSWORD_BYTES),
            f"user.{ADMIN_USER}": secrets.token_urlsafe(PASSWORD_BYTES),
            f"user.{CLIENT_USER}": secrets.token_urlsafe(PASSWORD_BYTES),
        }
        for stale in (self.ca_pem, self.keystore, self._dir / "ca.p12"):
            stale.unlink(missing_ok=True)
        self._make_certificates(values["keystore.password"])
        for user, path in (
            (CLIENT_USER, self.client_properties),
            (ADMIN_USER, self.admin_properties),
        ):
            _private(
                path,
                "# kstream --kafka-config file for the local broker's SASL_SSL listener\n"
                + "".join(f"{k}={v}\n" for k, v in self._client(user, values).items()),
            )
        # Last: its presence says everything above is complete.
        _private(self._secrets, "".join(f"{k}={v}\n" for k, v in values.items()))

    def _client(self, user: str, values: Mapping[str, str]) -> dict[str, str]:
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": values[f"user.{user}"],
            "ssl.ca.location": str(self.ca_pem),
        }

    def _values(self) -> dict[str, str]:
        if not self.exists():
            raise BrokerError(f"the broker's security files in {self._dir} are missing")
        return _properties(self._secrets)

    def admin_settings(self) -> dict[str, str]:
        """librdkafka settings for the broker's own user (readiness checks, ACL administration)."""
        return self._client(ADMIN_USER, self._values())

    def scram_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments creating both users."""
        values = self._values()
        return [
            arg
            for user in (ADMIN_USER, CLIENT_USER)
            for arg in (
                "--add-scram",
                f"{MECHANISM}=[name={user},password={values[f'user.{user}']}]",
            )
        ]

    def server_properties(self, *, acls: bool = False) -> str:
        """The broker settings of the SASL_SSL listener (appended to server.properties).

        With `acls`, KRaft's StandardAuthorizer denies what no ACL allows. Its
        super users are `ADMIN_USER` and ``ANONYMOUS``: the latter is the
        principal of the controller listener (PLAINTEXT on 127.0.0.1), which the
        broker's own requests to its controller arrive on; no client of the
        SASL_SSL listener is ever anonymous.
        """
        values = self._values()
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{values[f"user.{ADMIN_USER}"]}";'
        )
        return (
            "\n# SASL_SSL listener (kstream broker start --security sasl-ssl)\n"
            f"sasl.enabled.mechanisms={MECHANISM}\n"
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}\n"
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config={jaas}\n"
            "ssl.keystore.type=PKCS12\n"
            f"ssl.keystore.location={self.keystore}\n"
            f"ssl.keystore.password={values['keystore.password']}\n"
            f"ssl.key.password={values['keystore.password']}\n"
            # The broker checks at start that a client trusting this store can reach it.
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_pem}\n"
            "ssl.client.auth=none\n"
        ) + (
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
            f"super.users=User:{ADMIN_USER};User:ANONYMOUS\n"
            if acls
            else ""
        )

    def _make_certificates(self, password: str) -> None:
        keytool = require_tool("keytool", "to make the local broker's TLS certificates (Java 17)")
        ca, broker = self._dir / "ca.p12", self.keystore
        csr, signed = self._dir / "broker.csr", self._dir / "broker.crt"
        store = ["-storetype", "PKCS12", "-storepass:env", "KSTREAM_KEYSTORE_PASSWORD"]
        key = ["-keyalg", "RSA", "-keysize", "2048", "-validity", str(VALIDITY_DAYS)]
        steps = [
            # The CA: a key pair whose certificate may sign others (basic constraint CA).
            ["-genkeypair", "-alias", "ca", *key, "-dname", "CN=kstream local CA",
             "-ext", "bc:c", "-keystore", str(ca), *store],
            ["-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca), *store,
             "-file", str(self.ca_pem)],
            # The broker's key pair, its request, and the CA's signature on it.
            ["-genkeypair", "-alias", "broker", *key, "-dname", "CN=localhost",
             "-ext", SUBJECT_ALT_NAMES, "-keystore", str(broker), *store],
            ["-certreq", "-alias", "broker", "-keystore", str(broker), *store, "-file", str(csr)],
            ["-gencert", "-rfc", "-alias", "ca", "-keystore", str(ca), *store,
             "-infile", str(csr), "-outfile", str(signed), "-validity", str(VALIDITY_DAYS),
             "-ext", SUBJECT_ALT_NAMES, "-ext", "ku:c=digitalSignature,keyEncipherment",
             "-ext", "eku=serverAuth"],
            # The keystore's chain: the CA first (trusted), then the signed certificate.
            ["-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_pem),
             "-keystore", str(broker), *store],
            ["-importcert", "-noprompt", "-alias", "broker", "-file", str(signed),
             "-keystore", str(broker), *store],
        ]  # fmt: skip
        env = {**os.environ, "KSTREAM_KEYSTORE_PASSWORD": password}
        for step in steps:
            done = subprocess.run(
                [keytool, *step], capture_output=True, text=True, env=env, check=False
            )
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise BrokerError(f"keytool {step[0]} failed: {last[0]}")
        csr.unlink(missing_ok=True)
        signed.unlink(missing_ok=True)
