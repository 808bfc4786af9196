"""Online endpoints: a registered model served by Azure's own inference server, on this machine.

An endpoint is a recorded object under $MLTRAIN_HOME/endpoints/<name>/ (endpoint_record.py), with deployments, each a
server process of its own that outlives whoever made it (serving.py starts it; serve.py is the process;
inference_server.py is all mltrain knows of Azure's server). Every deployment listens on the endpoint's port
(SO_REUSEPORT) and on a private one; a request that reaches a deployment the traffic rule did not pick is passed
on to the picked one's private port (wsgi_app.py), so an endpoint with one deployment has no hop at all.
"""
