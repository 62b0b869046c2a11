"""A local S3-compatible server (moto) for the storage tests.

The server listens on 127.0.0.1 only, on a port the OS picks, and runs in a
daemon thread of the test process. Clients are pointed at it explicitly through
``endpoint_url``; dummy credentials are used so nothing ever looks for real ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

#: Environment for every S3 client in the test session: dummy credentials, no
#: config/credential files, no instance-metadata lookups, and no proxy for loopback.
DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/zv-tests/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/zv-tests/config",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

BUCKET = "zv-storage-tests"


@dataclass
class S3Server:
    """A running moto server with one bucket."""

    endpoint_url: str
    bucket: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    _server: Any = None

    @property
    def url_prefix(self) -> str:
        return f"s3://{self.bucket}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def start_s3_server(bucket: str = BUCKET) -> S3Server:
    """Start moto on 127.0.0.1 (free port) and create ``bucket``. Call ``stop()`` when done."""
    import boto3
    from moto.server import ThreadedMotoServer

    # werkzeug logs every request at INFO; keep test output readable.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1", host
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket=bucket)
        assert bucket in [b["Name"] for b in client.list_buckets()["Buckets"]]
    except BaseException:
        server.stop()
        raise
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    return S3Server(endpoint_url=endpoint, bucket=bucket, storage_options=options, _server=server)
