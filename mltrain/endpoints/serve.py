"""A deployment's server process: `python -m mltrain.endpoints.serve DEPLOYMENT_DIR`, started by serving.py in
a session of its own, so that it outlives the notebook or command that deployed it.

It reads the deployment's record, puts Azure's settings in the environment (inference_server.py), and runs
gunicorn with the endpoint's app (wsgi_app.py) on the deployment's private port, its workers (endpoint_worker.py)
each also on the endpoint's address with their share of its sockets.
gunicorn's master stays this process: stopping the deployment is a signal to its process group.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List

from mltrain.endpoints import inference_server
from mltrain.endpoints.endpoint_record import DEPLOYMENT_FILE, ENDPOINT_FILE


def main(argv: List[str]) -> int:
    folder = Path(argv[0]).resolve()
    deployment = json.loads((folder / DEPLOYMENT_FILE).read_text())
    endpoint_dir = folder.parent.parent
    endpoint = json.loads((endpoint_dir / ENDPOINT_FILE).read_text())
    os.environ.update(inference_server.server_environment(
        deployment["scoring_script"], deployment["code_dir"], deployment["model_dir"],
        f"{endpoint['name']}/{deployment['name']}", int(deployment["request_timeout_ms"])))
    os.environ.update({"MLTRAIN_ENDPOINT_DIR": str(endpoint_dir), "MLTRAIN_DEPLOYMENT": deployment["name"],
                       "MLTRAIN_PRIVATE_PORT": str(deployment["port"])})
    # The master binds the private port only; each worker opens its share of the endpoint's port (endpoint_worker.py)
    threads = int(deployment.get("max_concurrent_requests_per_instance") or 1)
    worker = "EndpointThreadWorker" if threads > 1 else "EndpointSyncWorker"
    sys.argv = inference_server.gunicorn_argv([f"127.0.0.1:{deployment['port']}"], int(deployment["instance_count"]),
                                              "mltrain.endpoints.wsgi_app:make_app()", threads=threads,
                                              worker_class=f"mltrain.endpoints.endpoint_worker.{worker}")
    from gunicorn.app.wsgiapp import WSGIApplication  # heavy

    WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]").run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
