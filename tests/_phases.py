"""The test run's two phases under pytest-xdist (``-n 2`` in pyproject's addopts).

Phase 1: the CPU-bound, independent test files run on every worker at once, a whole file
per work unit (its module-scoped fixtures are built once). Phase 2: once every phase-1
test has finished, the files in :data:`SERIAL` run one after another on ONE worker while
every other worker has exited: the live labs (network namespaces, FRR, sshd, OpenSM),
the Prometheus server, the browser, the Ray cluster and the tests that time a process or
signal it at a moment. They see the machine as a plain ``pytest`` run gives it to them,
never a second test beside them (under load they are the tests that flake).

``python -m pytest -n 0`` runs everything in one process, in the usual order.
"""

from __future__ import annotations

from collections import OrderedDict

#: test files (or folders, ending in "/") that run alone, after every other test, and why
SERIAL: dict[str, str] = {
    "tests/lab/": "live labs: network namespaces, FRR, sshd, ansible, OpenSM/ibsim",
    "tests/telemetry/test_exporter.py": "a live lab's exporter scraped by real Prometheus",
    "tests/telemetry/test_exporter_labels.py": "a real Prometheus server, timed waits",
    "tests/telemetry/test_collective_view.py": "a real Prometheus server",
    "tests/telemetry/test_monitoring.py": "real Prometheus servers, timed waits",
    "tests/telemetry/test_openmetrics.py": "a real Prometheus server (backfill, query)",
    "tests/web/test_app.py": "a real server on loopback (uvicorn) and a browser",
    "tests/web/test_browser.py": "a real browser (Chromium) on a real server",
    "tests/web/test_console.py": "a real `aifabric serve` process on loopback",
    "tests/web/test_browser_console.py": "a real browser on a real server, timed waits",
    "tests/web/test_serve_cli.py": "`serve` processes, one on a live lab, signalled",
    "tests/web/test_server.py": "real servers on loopback, timed waits",
    "tests/web/test_static.py": "a real browser on a real server",
    "tests/sweep/test_ray.py": "a real Ray cluster, a worker killed mid-point",
    "tests/sweep/test_ray_cli.py": "a real Ray cluster, SIGINT mid-sweep",
    "tests/sweep/test_run.py": "SIGINT/SIGKILL of sweeps while they run",
    "tests/cli/test_interrupt.py": "SIGINT at moments timed from an uninterrupted run",
    "tests/cli/test_outputs.py": "SIGKILL of a build while it runs (a race it must win)",
    # wall-clock bounds (a refusal within 1 s, a view within 2 s): timed, so alone too
    "tests/spec/test_yaml_limits.py": "refusals timed against 1 s",
    "tests/goodput/test_edges.py": "a refusal timed against 5 s",
    "tests/sweep/test_cap.py": "refusals timed against 1 s and 30 s",
    "tests/web/test_topology.py": "the overview and search timed against 2 s and 1 s",
    "tests/web/test_twin.py": "a what-if timed against 6 s",
}


def is_serial(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (relative to the rootdir) runs in phase 2."""
    path = nodeid.split("::", 1)[0]
    return any(path == s or (s.endswith("/") and path.startswith(s)) for s in SERIAL)


def make_scheduler(config, log):
    """The two-phase scheduler (pytest-xdist's ``pytest_xdist_make_scheduler``)."""
    from xdist.scheduler import LoadFileScheduling

    class TwoPhaseScheduling(LoadFileScheduling):
        """:class:`LoadFileScheduling` (one file per work unit) whose :data:`SERIAL`
        files are held back until every other test is done, then all go to one worker
        and the other workers are shut down."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.serial: OrderedDict[str, dict[str, bool]] = OrderedDict()
            self.serial_node = None
            self.keeper = None

        @property
        def tests_finished(self) -> bool:
            return not self.serial and super().tests_finished

        @property
        def has_pending(self) -> bool:
            return bool(self.serial) or super().has_pending

        def _depleted(self) -> bool:
            """Every worker has at most the one test it holds back (a worker runs its
            last test only once it is sent more work or told to shut down)."""
            return all(self._pending_of(work) <= 1 for work in self.assigned_work.values())

        def _start_serial(self, node) -> None:
            """Every serial file to ``node``, in collection order, once it is the only
            worker left."""
            self.serial_node = node
            while self.serial:
                self.workqueue.update([self.serial.popitem(last=False)])
                self._assign_work_unit(node)
            node.shutdown()  # after the tests it was sent

        def _enter_phase_2(self, keeper) -> None:
            """Phase 1 is done but for held-back tests: the other workers shut down
            (each runs its last test, then exits); ``keeper`` gets the serial files once
            they are gone (:meth:`remove_node`)."""
            self.keeper = keeper
            for other in self.nodes:
                if other is not keeper and not other.shutting_down:
                    other.shutdown()
            if self.nodes == [keeper]:
                self._start_serial(keeper)

        def remove_node(self, node):
            crashitem = super().remove_node(node)
            if (self.serial and self.serial_node is None and self.keeper is not None
                    and self.nodes == [self.keeper]):
                self._start_serial(self.keeper)
            return crashitem

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if self.workqueue:
                super()._reschedule(node)
                return
            if self.serial:
                if self.keeper is None and self._depleted():
                    self._enter_phase_2(node)
                return
            node.shutdown()

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self._reschedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            if not self.collection:
                return
            for nodeid in self.collection:
                scope = self._split_scope(nodeid)
                queue = self.serial if is_serial(nodeid) else self.workqueue
                queue.setdefault(scope, {})[nodeid] = False
            if not self.workqueue:
                self._enter_phase_2(self.nodes[0])
                return
            for node in self.nodes[len(self.workqueue):]:  # more workers than files
                self.assigned_work.pop(node, None)
                node.shutdown()
            for node in self.nodes:
                if not node.shutting_down:
                    self._assign_work_unit(node)
            for node in self.nodes:
                self._reschedule(node)

    return TwoPhaseScheduling(config, log)
