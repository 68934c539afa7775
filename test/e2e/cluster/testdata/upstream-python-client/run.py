#!/usr/bin/env python3
"""Runs one command in a sandbox the way upstream's Python SDK does in its default mode.

SandboxClient() with no connection settings spawns `kubectl port-forward
svc/sandbox-router-svc <local>:8080 -n agent-sandbox-system`, polls the local port until it
accepts, then POSTs /execute with the router headers and no credential. This client makes the
same calls with the standard library only and prints the runtime's JSON answer. A router token,
when SANDBOX_ROUTER_TOKEN is set and not empty, is sent as Authorization: Bearer (Paddock's own
clients do); kubectl comes from KUBECTL (default: kubectl on PATH).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROUTER_SERVICE = "svc/sandbox-router-svc"
ROUTER_NAMESPACE = "agent-sandbox-system"
ROUTER_PORT = 8080
LEGACY_PORT = 8888


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, deadline):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("kubectl port-forward exited with %d: %s" % (proc.returncode, proc.stderr.read().decode()))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("kubectl port-forward did not listen on %d in time" % port)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--sandbox", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--router-namespace", default=ROUTER_NAMESPACE)
    args = parser.parse_args()

    port = free_port()
    proc = subprocess.Popen(
        [os.environ.get("KUBECTL", "kubectl"), "port-forward", ROUTER_SERVICE,
         "%d:%d" % (port, ROUTER_PORT), "-n", args.router_namespace],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proc, time.monotonic() + 30)
        headers = {
            "Content-Type": "application/json",
            "X-Sandbox-ID": args.sandbox,
            "X-Sandbox-Namespace": args.namespace,
            "X-Sandbox-Port": str(LEGACY_PORT),
            "X-Sandbox-Timeout": "60",
        }
        if os.environ.get("SANDBOX_ROUTER_TOKEN"):
            headers["Authorization"] = "Bearer " + os.environ["SANDBOX_ROUTER_TOKEN"]
        req = urllib.request.Request(
            "http://127.0.0.1:%d/execute" % port,
            data=json.dumps({"command": args.command}).encode(),
            method="POST",
            headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                sys.stdout.write(resp.read().decode())
        except urllib.error.HTTPError as err:
            sys.stderr.write("POST /execute: %d %s\n" % (err.code, err.read().decode()))
            return 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
