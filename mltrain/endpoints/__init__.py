"""Online endpoints: a registered model served by Azure's own inference server, on this machine.

An endpoint is a recorded object under $MLTRAIN_HOME/endpoints/<name>/ (endpoint_record.py), with deployments, each a
server process of its own that outlives whoever made it (serving.py starts it; serve.py is the process;
inference_server.py is all mltrain knows of Azure's server). Each deployment listens on a private port, and its
workers on the endpoint's port with sockets in proportion to its share of the traffic (SO_REUSEPORT; balance.py,
endpoint_worker.py), so the kernel's choice of deployment is the traffic rule's and no request takes a hop; only
a request that names another deployment is passed on to that one's private port (wsgi_app.py).
"""
