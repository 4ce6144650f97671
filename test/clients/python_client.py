"""The official Python client (Debian's python3-kubernetes) against a kube-sim server.

Run by test/python-client.test.ts as `/usr/bin/python3 python_client.py MODE KUBECONFIG NAMESPACE [ARGS]`; each
mode does what a user's script would and prints one JSON document of what it saw, for the test to judge.
"""

import json
import sys
import threading
import time

from kubernetes import client, config, dynamic, utils, watch
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward, stream


def api_error(e):
    """What an ApiException tells its catcher."""
    return {
        "status": e.status,
        "reason": e.reason,
        "body": e.body.decode() if isinstance(e.body, bytes) else e.body,
        "contentType": (e.headers or {}).get("Content-Type"),
    }


def watch_namespaces(core, ns, _args):
    # The initial events of a watch without a resourceVersion: every namespace, ADDED.
    listed = sorted(n.metadata.name for n in core.list_namespace().items)
    initial = []
    w = watch.Watch()
    for event in w.stream(core.list_namespace, timeout_seconds=30):
        initial.append([event["type"], type(event["object"]).__name__, event["object"].metadata.name])
        if len(initial) == len(listed):
            w.stop()

    # From the list's resourceVersion: what another thread does meanwhile, in order, nothing lost.
    rv = core.list_namespace().metadata.resource_version
    name = ns + "-watched"

    def writer():
        time.sleep(0.2)
        core.create_namespace({"metadata": {"name": name}})
        core.patch_namespace(name, {"metadata": {"labels": {"seen": "yes"}}})
        core.delete_namespace(name)

    thread = threading.Thread(target=writer)
    thread.start()
    changes = []
    w = watch.Watch()
    for event in w.stream(core.list_namespace, resource_version=rv, timeout_seconds=30):
        obj = event["object"]
        if obj.metadata.name != name:
            continue
        changes.append(
            {
                "type": event["type"],
                "labels": obj.metadata.labels,
                "phase": obj.status.phase if obj.status else None,
                "terminating": obj.metadata.deletion_timestamp is not None,
            }
        )
        if event["type"] == "DELETED":
            w.stop()
    thread.join()

    # A label-selected watch: an object relabelled out of the selection is DELETED for this watcher.
    core.create_namespaced_config_map(ns, {"metadata": {"name": "picked", "labels": {"app": "py"}}, "data": {"k": "1"}})
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.patch_namespaced_config_map("picked", ns, {"data": {"k": "2"}})
    core.patch_namespaced_config_map("picked", ns, {"metadata": {"labels": {"app": "other"}}})
    selected = []
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_config_map, ns, label_selector="app=py", resource_version=rv, timeout_seconds=30
    ):
        selected.append([event["type"], event["object"].data, event["object"].metadata.labels])
        if event["type"] == "DELETED":
            w.stop()

    # timeout_seconds: the server ends the watch, and the stream with it.
    started = time.monotonic()
    ended = [e["type"] for e in watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1)]
    return {
        "listed": listed,
        "initial": initial,
        "changes": changes,
        "selected": selected,
        "timedOut": {"events": ended, "seconds": time.monotonic() - started},
    }


def watch_expired(core, ns, _args):
    # Past the server's watch history (sim serve --watch-history 10): Watch retries once on 410, then raises.
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    for i in range(30):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}"}})
    try:
        events = [e["type"] for e in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv)]
        return {"events": events}
    except ApiException as e:
        return {"status": e.status, "reason": e.reason, "from": rv}


def create_from_yaml(core, ns, args):
    api = client.ApiClient()
    created = utils.create_from_yaml(api, args[0])
    first = [[f"{o.kind}/{o.metadata.name}" for o in group] for group in created]
    try:
        utils.create_from_yaml(api, args[0])
        again = None
    except utils.FailToCreateError as e:
        again = [api_error(x) for x in e.api_exceptions]
    return {"created": first, "again": again}


def running_pod(core, ns, name):
    """Creates a pod and waits, with a watch, until the simulated kubelet runs it."""
    core.create_namespaced_pod(
        ns, {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}}
    )
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}", timeout_seconds=30):
        if event["object"].status.phase == "Running":
            w.stop()
            return
    raise RuntimeError(f"pod {name} never ran")


def exec_(core, pod, ns, command, **kwargs):
    return stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        ns,
        command=command,
        stdout=True,
        stderr=True,
        tty=False,
        **kwargs,
    )


def exec_streams(core, ns, _args):
    running_pod(core, ns, "shell")
    # The whole output at once (what most scripts use).
    preloaded = exec_(core, "shell", ns, ["sh", "-c", "echo hello; hostname"], stdin=False)
    # Streams kept apart, and the exit code from the error channel.
    resp = exec_(
        core, "shell", ns, ["sh", "-c", "echo out; cat /missing; exit 3"], stdin=False, _preload_content=False
    )
    resp.run_forever(timeout=10)
    failed = {"stdout": resp.read_stdout(), "stderr": resp.read_stderr(), "returncode": resp.returncode}
    resp = exec_(core, "shell", ns, ["printenv", "HOSTNAME"], stdin=False, _preload_content=False)
    resp.run_forever(timeout=10)
    succeeded = {"stdout": resp.read_stdout(), "returncode": resp.returncode}
    return {"preloaded": preloaded, "failed": failed, "succeeded": succeeded}


def exec_stdin(core, ns, _args):
    running_pod(core, ns, "interactive")
    resp = exec_(core, "interactive", ns, ["sh"], stdin=True, _preload_content=False)
    answers = []
    # One line at a time: each is answered before the next is sent (a shell runs a line as it arrives). A line
    # left unanswered for 5 s fails the test: the rest are sent without waiting.
    waiting = True
    for line in ["echo one", "echo two; echo three", "cat /missing"]:
        resp.write_stdin(line + "\n")
        out, err = "", ""
        deadline = time.monotonic() + (5 if waiting else 0)
        quiet_since = None
        # Until the line's answer has come and nothing more for 0.5 s (its commands may answer frame by frame).
        while time.monotonic() < deadline and resp.is_open():
            resp.update(timeout=0.1)
            more = (resp.read_stdout() if resp.peek_stdout() else "", resp.read_stderr() if resp.peek_stderr() else "")
            out, err = out + more[0], err + more[1]
            if any(more):
                quiet_since = None
            elif out or err:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= 0.5:
                    break
        answers.append({"line": line, "stdout": out, "stderr": err})
        waiting = waiting and bool(out or err)
    resp.write_stdin("exit 4\n")
    resp.run_forever(timeout=10 if waiting else 2)
    return {"answers": answers, "returncode": resp.returncode, "open": resp.is_open()}


def port_forward(core, ns, _args):
    running_pod(core, ns, "web")
    pf = portforward(core.connect_get_namespaced_pod_portforward, "web", ns, ports="8080,9090")
    out = {}
    for port in (8080, 9090):
        sock = pf.socket(port)
        sock.settimeout(10)
        data = b""
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: web\r\n\r\n")
            while chunk := sock.recv(4096):
                data += chunk
        except OSError:
            pass  # the forwarded connection was refused: the client closed its end of it
        sock.close()
        out[str(port)] = {"data": data.decode(), "error": pf.error(port)}
    return out


def errors(core, ns, _args):
    out = {}
    try:
        core.read_namespaced_config_map("nope", ns)
    except ApiException as e:
        out["notFound"] = api_error(e)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "twice"}})
    try:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "twice"}})
    except ApiException as e:
        out["alreadyExists"] = api_error(e)
    try:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    except ApiException as e:
        out["invalid"] = api_error(e)
    stale = core.read_namespaced_config_map("twice", ns)
    core.patch_namespaced_config_map("twice", ns, {"data": {"k": "newer"}})
    stale.data = {"k": "stale"}
    try:
        core.replace_namespaced_config_map("twice", ns, stale)
    except ApiException as e:
        out["conflict"] = api_error(e)
    return out


def discovery(core, ns, _args):
    # The typed discovery calls ask for /version/, /api/ and /apis/ (a trailing slash, which go-restful allows).
    out = {
        "version": client.VersionApi().get_code().git_version,
        "coreVersions": client.CoreApi().get_api_versions().versions,
        "groups": [g.name for g in client.ApisApi().get_api_versions().groups],
        "appsPreferred": client.AppsApi().get_api_group().preferred_version.group_version,
        "appsResources": [r.name for r in client.AppsV1Api().get_api_resources().resources],
    }
    # The dynamic client finds kinds through discovery, then reads and writes as any other.
    dyn = dynamic.DynamicClient(client.ApiClient())
    config_maps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    config_maps.create(
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn", "namespace": ns}, "data": {"a": "1"}}
    )
    patched = config_maps.patch(
        body={"data": {"b": "2"}}, name="dyn", namespace=ns, content_type="application/merge-patch+json"
    )
    out["dynamic"] = {
        "patched": dict(patched.data),
        "listed": [c.metadata.name for c in config_maps.get(namespace=ns).items],
        "watched": [[e["type"], e["object"].metadata.name] for e in config_maps.watch(namespace=ns, timeout=1)],
    }
    return out


MODES = {
    "discovery": discovery,
    "watch": watch_namespaces,
    "watch-expired": watch_expired,
    "create-from-yaml": create_from_yaml,
    "exec": exec_streams,
    "exec-stdin": exec_stdin,
    "port-forward": port_forward,
    "errors": errors,
}

if __name__ == "__main__":
    mode, kubeconfig, namespace, *rest = sys.argv[1:]
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    print(json.dumps(MODES[mode](core, namespace, rest)))
