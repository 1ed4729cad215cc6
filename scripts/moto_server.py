"""Single-threaded moto S3 server for the integration tests.

`moto_server` serves requests on threads, and then two conditional writers (If-None-Match /
If-Match) can both win a race on the same key. Serving one request at a time makes each
request atomic, which is the guarantee the lease protocol relies on from real S3.
"""

import argparse
import os

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    # moto builds some URLs it returns from MOTO_PORT, as moto_server itself does.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    run_simple(args.host, args.port, DomainDispatcherApplication(create_backend_app), threaded=False)


if __name__ == "__main__":
    main()
