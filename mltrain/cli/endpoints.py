"""`mltrain endpoints ...`: online endpoints on this machine (mltrain.endpoints), from the command line or from
Azure's endpoint and deployment YAML (`az ml online-endpoint create -f` / `online-deployment create -f`)."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from mltrain.base.errors import MltrainError
from mltrain.base.signals import SignalsSetEvent
from mltrain.endpoints import serving
from mltrain.endpoints.endpoint_record import EndpointError, deployment_names, load_deployment, load_endpoint


def _create(args: argparse.Namespace) -> int:
    traffic = None
    if args.file:
        from mltrain.azureml.online_files import endpoint_from_file  # startup

        overrides = {"name": args.name} if args.name else None
        spec, traffic = endpoint_from_file(args.file, overrides)
    elif args.name:
        spec = serving.EndpointSpec(name=args.name)
    else:
        raise MltrainError("mltrain endpoints create: give NAME or --file ENDPOINT.yml")
    spec.auth_mode = args.auth_mode or spec.auth_mode
    spec.host, spec.port = args.host, args.port
    record = serving.create_or_update_endpoint(spec)
    if traffic:
        print("note: the file's traffic is set once its deployments exist (mltrain endpoints traffic)")
    print(f"endpoint {record.name}: {record.scoring_uri} (auth: {record.auth_mode})")
    return 0


def _deploy(args: argparse.Namespace) -> int:
    if args.file:
        from mltrain.azureml.online_files import deployment_from_file  # startup

        overrides = {k: v for k, v in (("name", args.name), ("endpoint_name", args.endpoint)) if v}
        spec = deployment_from_file(args.file, overrides)
    else:
        if not (args.endpoint and args.name):
            raise MltrainError("mltrain endpoints deploy: give ENDPOINT --name NAME (with --model, --code and "
                               "--scoring-script), or --file DEPLOYMENT.yml")
        spec = serving.DeploymentSpec(name=args.name, endpoint=args.endpoint, models=[_model(m) for m in args.model],
                                        scoring_script=args.scoring_script, code_dir=args.code,
                                        environment=_environment(args.environment),
                                        instance_count=args.instance_count)
    endpoint = load_endpoint(spec.endpoint)
    with _stop_on_signals() as stop:
        serving.deploy(spec, stop=stop)
    if args.all_traffic:
        serving.set_traffic(endpoint.name, {n: (100 if n == spec.name else 0) for n in deployment_names(endpoint.name)})
        print(f"all of endpoint {endpoint.name}'s traffic goes to {spec.name}")
    return 0


def _model(text: str):  # -> mltrain.models.registry.Model
    from mltrain.models.registry import Model  # heavy

    name, _, version = text.removeprefix("azureml:").partition(":")
    if version and not version.isdigit():
        raise MltrainError(f"--model {text}: a version is a whole number (NAME:3)")
    return Model(name, int(version) if version else None)


def _environment(name: Optional[str]):
    if not name:
        return None
    from mltrain.environments.spec import from_config  # startup

    return from_config({"name": name})


def _traffic(args: argparse.Namespace) -> int:
    shares: Dict[str, int] = {}
    for item in args.shares:
        name, eq, value = item.partition("=")
        if not eq or not value.strip().isdigit():
            raise MltrainError(f"traffic '{item}': write DEPLOYMENT=PERCENT, e.g. blue=90 green=10")
        shares[name] = int(value)
    record = serving.set_traffic(args.endpoint, shares)
    print(f"endpoint {record.name}: " + ", ".join(f"{k} {v}%" for k, v in sorted(record.traffic.items())))
    return 0


def _rows() -> List[Dict[str, object]]:
    rows: List[Dict[str, object]] = []
    for name in serving.names():
        record = load_endpoint(name)
        deployments = []
        for d in deployment_names(name):
            dep = load_deployment(name, d)
            state, why = serving.deployment_state(dep)
            deployments.append({"name": d, "state": state, "error": why, "traffic": record.traffic.get(d, 0),
                                "pid": dep.pid, "ready_s": dep.ready_s, "models": [f"{m['name']}:{m['version']}" for m in dep.models]})
        rows.append({"name": name, "scoring_uri": record.scoring_uri, "auth_mode": record.auth_mode,
                     "deployments": deployments, "created": record.created})
    return rows


def _list(args: argparse.Namespace) -> int:
    rows = _rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no endpoints")
        return 0
    print(f"{'ENDPOINT':<24} {'STATE':<10} {'URI':<36} DEPLOYMENTS")
    for row in rows:
        deps = row["deployments"]
        assert isinstance(deps, list)
        states = {d["state"] for d in deps}
        state = "Failed" if "Failed" in states else ("Succeeded" if deps else "NoDeployments")
        shown = " ".join(f"{d['name']}({d['traffic']}%,{d['state']})" for d in deps) or "-"
        print(f"{row['name']:<24} {state:<10} {row['scoring_uri']!s:<36} {shown}")
        for d in deps:
            if d["error"]:
                print(f"  {d['name']}: {d['error']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    record = load_endpoint(args.endpoint)
    row = next(r for r in _rows() if r["name"] == record.name)
    if args.json:
        print(json.dumps(row, indent=2))
        return 0
    print(f"endpoint:    {record.name}\nscoring uri: {record.scoring_uri}\nswagger:     {record.swagger_uri}\n"
          f"auth:        {record.auth_mode}\ncreated:     {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.created))}")
    deps = row["deployments"]
    assert isinstance(deps, list)
    for d in deps:
        print(f"deployment {d['name']}: {d['state']}, {d['traffic']}% of the traffic, models {', '.join(d['models']) or '-'}"
              + (f", ready in {d['ready_s']} s" if d["ready_s"] is not None else "") + (f"\n  {d['error']}" if d["error"] else ""))
    return 0


def _logs(args: argparse.Namespace) -> int:
    names = deployment_names(args.endpoint) if args.deployment is None else [args.deployment]
    load_endpoint(args.endpoint)
    if not names:
        raise EndpointError(f"endpoint {args.endpoint} has no deployments yet")
    if len(names) > 1:
        raise EndpointError(f"endpoint {args.endpoint} has deployments {', '.join(names)}: name one with --deployment")
    sys.stdout.write(serving.logs(args.endpoint, names[0], args.lines))
    return 0


def _invoke(args: argparse.Namespace) -> int:
    if args.request_file:
        try:
            body = Path(args.request_file).read_bytes()
        except OSError as exc:
            raise MltrainError(f"--request-file {args.request_file}: {exc.strerror}") from None
    elif args.data is not None:
        body = args.data.encode()
    else:
        raise MltrainError("mltrain endpoints invoke: give --request-file FILE or --data JSON")
    status, answer = serving.invoke(args.endpoint, body, deployment=args.deployment)
    sys.stdout.write(answer.decode(errors="replace") + "\n")
    return 0 if status == 200 else 1


def _keys(args: argparse.Namespace) -> int:
    keys = serving.regenerate_keys(args.endpoint) if args.regenerate else serving.get_keys(args.endpoint)
    print(json.dumps(keys, indent=2))
    return 0


def _restart(args: argparse.Namespace) -> int:
    load_endpoint(args.endpoint)
    names = [args.deployment] if args.deployment else deployment_names(args.endpoint)
    if not names:
        raise EndpointError(f"endpoint {args.endpoint} has no deployments to restart")
    with _stop_on_signals() as stop:
        for name in names:
            serving.restart(args.endpoint, name, stop=stop)
    return 0


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """Ctrl-C and SIGTERM while a server is being started set an event the deployment watches, instead of
    raising wherever the command is (holding the endpoint's lock, writing a record): it stops the new server and
    puts the records back, then ends with one line, exit status 130 (serving.DeployInterrupted)."""
    stop = threading.Event()
    with SignalsSetEvent(stop):
        yield stop


def _delete(args: argparse.Namespace) -> int:
    if args.deployment:
        serving.delete_deployment(args.endpoint, args.deployment)
        print(f"deleted deployment {args.deployment} of endpoint {args.endpoint}")
    else:
        serving.delete_endpoint(args.endpoint)
        print(f"deleted endpoint {args.endpoint}")
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain endpoints", description="online endpoints on this machine")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("create", help="an endpoint (NAME, or Azure's endpoint YAML with --file)")
    p.add_argument("name", nargs="?")
    p.add_argument("--file", "-f", help="an Azure online endpoint YAML file")
    p.add_argument("--auth-mode", choices=["key", "aml_token", "none"])
    p.add_argument("--host", default="127.0.0.1", help="the address it listens on (default: this machine only)")
    p.add_argument("--port", type=int, default=0, help="its port (default: a free one, kept for its life)")
    p.set_defaults(func=_create)
    p = sub.add_parser("deploy", help="a deployment of an endpoint (created or updated), or Azure's deployment YAML")
    p.add_argument("endpoint", nargs="?")
    p.add_argument("--file", "-f", help="an Azure online deployment YAML file")
    p.add_argument("--name")
    p.add_argument("--model", action="append", default=[], metavar="NAME[:VERSION]")
    p.add_argument("--code", help="the folder of the scoring script")
    p.add_argument("--scoring-script")
    p.add_argument("--environment", help="a curated environment (mltrain env list); default: mltrain's own")
    p.add_argument("--instance-count", type=int, default=1, help="the server's worker processes")
    p.add_argument("--all-traffic", action="store_true", help="then send all of the endpoint's traffic to it")
    p.set_defaults(func=_deploy)
    p = sub.add_parser("traffic", help="split the endpoint's traffic: blue=90 green=10")
    p.add_argument("endpoint")
    p.add_argument("shares", nargs="+", metavar="DEPLOYMENT=PERCENT")
    p.set_defaults(func=_traffic)
    p = sub.add_parser("list", help="every endpoint, its deployments and whether their servers run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_list)
    p = sub.add_parser("show", help="one endpoint")
    p.add_argument("endpoint")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_show)
    p = sub.add_parser("logs", help="a deployment's server log")
    p.add_argument("endpoint")
    p.add_argument("--deployment")
    p.add_argument("--lines", type=int)
    p.set_defaults(func=_logs)
    p = sub.add_parser("invoke", help="send one request (with the endpoint's key)")
    p.add_argument("endpoint")
    p.add_argument("--request-file")
    p.add_argument("--data", help="the request body, inline")
    p.add_argument("--deployment", help="this deployment, whatever the traffic says")
    p.set_defaults(func=_invoke)
    p = sub.add_parser("keys", help="the endpoint's keys")
    p.add_argument("endpoint")
    p.add_argument("--regenerate", action="store_true")
    p.set_defaults(func=_keys)
    p = sub.add_parser("restart", help="start deployments again from their records (after a reboot, a killed server)")
    p.add_argument("endpoint")
    p.add_argument("--deployment", help="only this one (default: every deployment of the endpoint)")
    p.set_defaults(func=_restart)
    p = sub.add_parser("delete", help="an endpoint (its servers stopped), or one deployment of it")
    p.add_argument("endpoint")
    p.add_argument("--deployment")
    p.set_defaults(func=_delete)
    args = parser.parse_args(argv)
    return int(args.func(args))
